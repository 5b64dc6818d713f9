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
 */
import { copyFile, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as zlib from "node:zlib";
import sqlite from "node-sqlite3-wasm";
import { isValidAgentId } from "../session/agent-id.js";
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

/** Copies the database (and its WAL) aside and opens the copy; see the module comment. */
async function openSnapshot(file: string): Promise<OpenDb> {
  const tmp = await mkdtemp(join(tmpdir(), "switchboard-import-"));
  try {
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

/** Reads every agent database under `stateDir`. Unreadable databases are skipped and reported. */
export async function scanSqliteStores(stateDir: string): Promise<StoreScan> {
  const skips: Skip[] = [];
  const sessions: SourceSession[] = [];
  const stores: string[] = [];
  const open: OpenDb[] = [];
  const agentsDir = join(stateDir, "agents");
  const dirs = await readdir(agentsDir, { withFileTypes: true }).catch(() => []);

  for (const d of dirs.sort((a, b) => a.name.localeCompare(b.name))) {
    if (!d.isDirectory()) continue;
    const file = join(agentsDir, d.name, "agent", SQLITE_STORE_FILE);
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
  }

  return {
    sessions,
    skips,
    stores,
    async close() {
      for (const h of open.splice(0)) {
        if (h.db.isOpen) h.db.close();
        await rm(h.tmp, { recursive: true, force: true });
      }
    },
  };
}
