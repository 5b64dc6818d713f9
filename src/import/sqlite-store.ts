/**
 * The SQLite generation of OpenClaw's state (2026.9 and later): one database per agent at
 * `agents/<agentId>/agent/openclaw-agent.sqlite`. Sessions are rows of `session_nodes`
 * (`session_key`, `current_session_id`, the entry JSON in `entry_json`); a session's
 * transcript is the rows of `transcript_events` for its current session id, in `seq` order,
 * one JSONL line each in `event_json` (or zstd-compressed in `event_zstd`).
 *
 * OpenClaw runs its databases in WAL mode, so recent writes may still sit in the `-wal`
 * file. A WebAssembly SQLite has no shared memory for the WAL index, so each database is
 * copied (with its `-wal`) to a temporary directory and opened there in exclusive locking
 * mode, where SQLite keeps the WAL index in its own memory. The live files are never opened,
 * so a running OpenClaw is neither locked nor changed; the import sees a snapshot.
 *
 * A copy can be as big as the database. Its directory is named after the importing process
 * (`switchboard-import-p<pid>-…`, with an `owner.json` naming the host), so an import that was
 * killed outright leaves nothing for ever: the next one removes the copies of processes that
 * are gone.
 */
import { rmSync } from "node:fs";
import { copyFile, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import * as zlib from "node:zlib";
import sqlite from "node-sqlite3-wasm";
import { isValidAgentId } from "../session/agent-id.js";
import { listAgentDirs } from "./agent-dirs.js";
import type { RawTranscriptLine, Skip, SourceSession, StoreScan, TranscriptSource } from "./types.js";

type Database = InstanceType<typeof sqlite.Database>;

export const SQLITE_STORE_FILE = "openclaw-agent.sqlite";
/** Rows per transcript page: bounds memory on very long transcripts. */
const PAGE = 500;

/** `zstdDecompressSync` arrived in Node 22.15 / 23.8; on older Nodes compressed rows are reported. */
const zstdDecompress = (zlib as unknown as { zstdDecompressSync?: (buf: Uint8Array) => Buffer }).zstdDecompressSync;

async function size(p: string): Promise<number | undefined> {
  return await stat(p).then(
    (s) => s.size,
    () => undefined,
  );
}

interface OpenDb {
  db: Database;
  tmp: string;
}

const SNAPSHOT_PREFIX = "switchboard-import-p";
const SNAPSHOT_RE = /^switchboard-import-p(\d+)-/;
const OWNER_FILE = "owner.json";

/** Snapshot directories of this process not removed yet: what an interrupted import must remove. */
const liveSnapshots = new Set<string>();

/**
 * Removes this process's snapshot copies at once, synchronously: for an import that has to stop
 * now (a second Ctrl-C, or its stop taking too long) and for `process.on("exit")`.
 */
export function removeSnapshotsSync(): void {
  for (const tmp of liveSnapshots) {
    rmSync(tmp, { recursive: true, force: true });
    liveSnapshots.delete(tmp);
  }
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    // EPERM: the process exists (another user's).
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * Removes the snapshot directories of imports whose process is gone (killed before it could
 * clean up). Only those of this host whose pid no longer runs: a live import's copy, or one a
 * process of another host (a shared temp dir) may still be reading, is left alone. Returns the
 * directories removed.
 */
export async function removeStaleSnapshots(dir: string = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [])) {
    const m = SNAPSHOT_RE.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || !processGone(pid)) continue;
    const path = join(dir, name);
    const owner = await readFile(join(path, OWNER_FILE), "utf8").then(
      (t) => JSON.parse(t) as { host?: unknown },
      () => undefined,
    );
    // Written first thing: a directory without it is mid-creation or not ours to judge.
    if (owner === undefined || owner.host !== hostname()) continue;
    await rm(path, { recursive: true, force: true }).then(
      () => removed.push(path),
      () => {},
    );
  }
  return removed;
}

/** Copies the database (and its WAL) aside and opens the copy; see the module comment. */
async function openSnapshot(file: string): Promise<OpenDb> {
  const tmp = await mkdtemp(join(tmpdir(), `${SNAPSHOT_PREFIX}${process.pid}-`));
  liveSnapshots.add(tmp);
  try {
    await writeFile(join(tmp, OWNER_FILE), JSON.stringify({ pid: process.pid, host: hostname(), source: file }));
    const copy = join(tmp, SQLITE_STORE_FILE);
    // The WAL first: a checkpoint racing the copy then at worst leaves frames already in the
    // main file, which SQLite ignores by their salt, rather than losing them.
    if (((await size(`${file}-wal`)) ?? 0) > 0) await copyFile(`${file}-wal`, `${copy}-wal`);
    await copyFile(file, copy);
    const db = new sqlite.Database(copy, { fileMustExist: true });
    try {
      db.exec("PRAGMA locking_mode=EXCLUSIVE");
      db.get("SELECT count(*) AS n FROM sqlite_schema");
    } catch (err) {
      db.close();
      throw err;
    }
    return { db, tmp };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    liveSnapshots.delete(tmp);
    throw err;
  }
}

function hasTable(db: Database, name: string): boolean {
  return db.get("SELECT 1 AS ok FROM sqlite_schema WHERE type = 'table' AND name = ?", [name]) !== null;
}

function eventText(row: Record<string, unknown>): RawTranscriptLine {
  const position = Number(row.seq);
  if (typeof row.event_json === "string") return { position, text: row.event_json };
  if (row.event_zstd instanceof Uint8Array) {
    if (!zstdDecompress)
      return {
        position,
        unreadable: `row ${position} is zstd-compressed and this Node (${process.version}) cannot inflate zstd`,
      };
    try {
      return { position, text: zstdDecompress(row.event_zstd).toString("utf8") };
    } catch (err) {
      return { position, unreadable: `row ${position}: ${(err as Error).message}` };
    }
  }
  return { position, unreadable: `row ${position} has no event` };
}

/** Whether `table` has `column` (`event_zstd` came with OpenClaw 2026.9.6; earlier stores lack it). */
function hasColumn(db: Database, table: string, column: string): boolean {
  const cols = db.all(`PRAGMA table_info(${table})`) as { name?: unknown }[];
  return cols.some((c) => c.name === column);
}

function sqliteTranscript(db: Database, dbFile: string, sessionId: string): TranscriptSource {
  return {
    describe: `${dbFile}#${sessionId}`,
    async *lines(): AsyncIterable<RawTranscriptLine> {
      const zstd = hasColumn(db, "transcript_events", "event_zstd") ? ", event_zstd" : "";
      const stmt = db.prepare(
        `SELECT seq, event_json${zstd} FROM transcript_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      );
      try {
        let after = -Infinity;
        for (;;) {
          const rows = stmt.all([sessionId, Number.isFinite(after) ? after : -1e15, PAGE]) as Record<string, unknown>[];
          for (const row of rows) yield eventText(row);
          if (rows.length < PAGE) return;
          after = Number(rows[rows.length - 1]!.seq);
        }
      } finally {
        stmt.finalize();
      }
    },
  };
}

export interface SqliteScanOptions {
  /** Called after each database, with the number of session rows read so far. */
  onProgress?: (rows: number) => void;
  /** Stops the scan between databases (Ctrl-C). */
  signal?: AbortSignal;
}

/** Reads every agent database under `stateDir`. Unreadable databases are skipped and reported. */
export async function scanSqliteStores(stateDir: string, opts: SqliteScanOptions = {}): Promise<StoreScan> {
  const skips: Skip[] = [];
  const sessions: SourceSession[] = [];
  const stores: string[] = [];
  const open: OpenDb[] = [];
  const close = async () => {
    for (const h of open.splice(0)) {
      if (h.db.isOpen) h.db.close();
      await rm(h.tmp, { recursive: true, force: true });
      liveSnapshots.delete(h.tmp);
    }
  };
  await removeStaleSnapshots();
  try {
    await readStores(stateDir, opts, { skips, sessions, stores, open });
  } catch (err) {
    // Interrupted between two databases: the copies made so far are not left behind.
    await close();
    throw err;
  }
  return { sessions, skips, stores, close };
}

async function readStores(
  stateDir: string,
  opts: SqliteScanOptions,
  out: { skips: Skip[]; sessions: SourceSession[]; stores: string[]; open: OpenDb[] },
): Promise<void> {
  const { skips, sessions, stores, open } = out;
  // Broken links under agents/ are reported by the JSON scan, which reads the same directories.
  for (const d of (await listAgentDirs(stateDir)).dirs) {
    opts.signal?.throwIfAborted();
    const file = join(d.path, "agent", SQLITE_STORE_FILE);
    const fileSize = await size(file);
    if (fileSize === undefined) continue;
    const agentId = d.name.toLowerCase();
    if (!isValidAgentId(agentId)) {
      skips.push({
        reason: "bad_agent_dir",
        source: file,
        detail: `agent directory ${JSON.stringify(d.name)} is not a valid agent id`,
      });
      continue;
    }
    let handle: OpenDb;
    try {
      handle = await openSnapshot(file);
    } catch (err) {
      skips.push({ reason: "unreadable_store", source: file, detail: (err as Error).message });
      continue;
    }
    open.push(handle);
    // Ctrl-C during the copy of a big database: stop before reading it.
    opts.signal?.throwIfAborted();
    const { db } = handle;
    if (!hasTable(db, "session_nodes")) {
      skips.push({
        reason: "unreadable_store",
        source: file,
        detail: "no session_nodes table (not an OpenClaw agent database?)",
      });
      continue;
    }
    stores.push(file);
    const withTranscripts = hasTable(db, "transcript_events");
    const rows = db.all(
      "SELECT session_key, current_session_id, entry_json, updated_at FROM session_nodes ORDER BY session_key",
    ) as Record<string, unknown>[];
    for (const row of rows) {
      const rawKey = String(row.session_key);
      const sessionId = typeof row.current_session_id === "string" ? row.current_session_id : undefined;
      let entry: unknown;
      try {
        entry = JSON.parse(String(row.entry_json));
      } catch {
        skips.push({
          reason: "bad_entry",
          source: `${file}#${rawKey}`,
          key: rawKey,
          detail: "entry_json is not valid JSON",
        });
        continue;
      }
      // The row's current_session_id names the transcript window: it wins over the JSON copy.
      if (sessionId && typeof entry === "object" && entry !== null && !Array.isArray(entry))
        entry = { ...entry, sessionId };
      sessions.push({
        generation: "sqlite",
        store: file,
        storeAgentId: agentId,
        rawKey,
        entry,
        fallbackUpdatedAt: Number(row.updated_at) || 0,
        ...(sessionId ? { fallbackSessionId: sessionId } : {}),
        ...(withTranscripts && sessionId ? { transcript: sqliteTranscript(db, file, sessionId) } : {}),
      });
    }
    opts.onProgress?.(sessions.length);
  }
}
