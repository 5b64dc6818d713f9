/**
 * The JSON generation of OpenClaw's state (Clawdbot, and OpenClaw before its SQLite store):
 * `agents/<agentId>/sessions/sessions.json` (a map of session key → entry) with one JSONL
 * transcript per session next to it, `<sessionId>.jsonl` or, for topics,
 * `<sessionId>-topic-<topicId>.jsonl`. Old single-agent installs kept one store at
 * `sessions/sessions.json`; a `sessions.json` directly in the given directory (a fixed
 * `session.store`) is read the same way. Read only.
 */
import { createReadStream } from "node:fs";
import { readdir, readFile, realpath, stat } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import { isValidAgentId } from "../session/agent-id.js";
import { isSafeSessionId } from "../session/session-id.js";
import type { RawTranscriptLine, Skip, SourceSession, StoreScan, TranscriptSource } from "./types.js";

interface StoreLocation {
  file: string;
  agentId: string;
}

async function exists(p: string): Promise<boolean> {
  return await stat(p).then(
    () => true,
    () => false,
  );
}

async function locateStores(stateDir: string, defaultAgentId: string, skips: Skip[]): Promise<StoreLocation[]> {
  const found: StoreLocation[] = [];
  const agentsDir = join(stateDir, "agents");
  const dirs = await readdir(agentsDir, { withFileTypes: true }).catch(() => []);
  for (const d of dirs.sort((a, b) => a.name.localeCompare(b.name))) {
    if (!d.isDirectory()) continue;
    const file = join(agentsDir, d.name, "sessions", "sessions.json");
    if (!(await exists(file))) continue;
    const agentId = d.name.toLowerCase();
    if (!isValidAgentId(agentId)) {
      skips.push({
        reason: "bad_agent_dir",
        source: file,
        detail: `agent directory ${JSON.stringify(d.name)} is not a valid agent id`,
      });
      continue;
    }
    found.push({ file, agentId });
  }
  for (const file of [join(stateDir, "sessions", "sessions.json"), join(stateDir, "sessions.json")]) {
    if (await exists(file)) found.push({ file, agentId: defaultAgentId });
  }
  return found;
}

/** Inside `dir` after resolving symlinks (OpenClaw ignores a sessionFile that escapes). */
async function insideDir(dir: string, file: string): Promise<string | undefined> {
  try {
    const real = await realpath(file);
    const rel = relative(await realpath(dir), real);
    return rel && !rel.startsWith("..") && !isAbsolute(rel) ? real : undefined;
  } catch {
    return undefined;
  }
}

const TOPIC_RE = /^(.+)-topic-(.+)\.jsonl$/;

function topicOf(file: string, sessionId: string): string | undefined {
  const m = TOPIC_RE.exec(basename(file));
  if (!m || m[1] !== sessionId) return undefined;
  try {
    return decodeURIComponent(m[2]!);
  } catch {
    return m[2];
  }
}

/**
 * The transcript of one entry, as OpenClaw resolves it: an explicit `sessionFile` (relative
 * to the sessions dir, or absolute but inside it; a path from another machine is tried by
 * its file name), else `<sessionId>.jsonl`, else the session's topic file.
 */
async function resolveTranscript(
  dir: string,
  entry: Record<string, unknown>,
  names: Set<string>,
): Promise<string | undefined> {
  const sessionFile = typeof entry.sessionFile === "string" ? entry.sessionFile.trim() : "";
  if (sessionFile) {
    const direct = await insideDir(dir, resolve(dir, sessionFile));
    if (direct) return direct;
    const byName = basename(sessionFile);
    // Every candidate is checked the same way: a file of the dir that is a symlink out of it is not read.
    if (names.has(byName)) return await insideDir(dir, join(dir, byName));
  }
  const sessionId = entry.sessionId;
  if (!isSafeSessionId(sessionId)) return undefined;
  if (names.has(`${sessionId}.jsonl`)) return await insideDir(dir, join(dir, `${sessionId}.jsonl`));
  const topic = [...names].filter((n) => n.startsWith(`${sessionId}-topic-`) && n.endsWith(".jsonl")).sort()[0];
  return topic ? await insideDir(dir, join(dir, topic)) : undefined;
}

export function jsonlTranscript(file: string, topicId?: string): TranscriptSource {
  return {
    describe: file,
    ...(topicId !== undefined ? { topicId } : {}),
    async *lines(): AsyncIterable<RawTranscriptLine> {
      const rl = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
      let position = 0;
      for await (const text of rl) {
        position++;
        yield { position, text };
      }
    },
  };
}

/** Reads every JSON-generation store under `stateDir`. Unreadable stores are skipped and reported. */
export async function scanJsonStores(stateDir: string, opts: { defaultAgentId: string }): Promise<StoreScan> {
  const skips: Skip[] = [];
  const sessions: SourceSession[] = [];
  const stores: string[] = [];
  const referenced = new Set<string>();
  const dirNames = new Map<string, Set<string>>();

  for (const { file, agentId } of await locateStores(stateDir, opts.defaultAgentId, skips)) {
    let parsed: unknown;
    let mtime: number;
    try {
      mtime = (await stat(file)).mtimeMs;
      parsed = JSON.parse(await readFile(file, "utf8"));
    } catch (err) {
      skips.push({ reason: "unreadable_store", source: file, detail: (err as Error).message });
      continue;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      skips.push({ reason: "unreadable_store", source: file, detail: "not a JSON object of session key → entry" });
      continue;
    }
    stores.push(file);
    const dir = resolve(file, "..");
    if (!dirNames.has(dir)) dirNames.set(dir, new Set(await readdir(dir).catch(() => [])));
    const names = dirNames.get(dir)!;
    for (const [rawKey, entry] of Object.entries(parsed as Record<string, unknown>)) {
      const src: SourceSession = {
        generation: "json",
        store: file,
        storeAgentId: agentId,
        rawKey,
        entry,
        fallbackUpdatedAt: Math.floor(mtime),
      };
      if (typeof entry === "object" && entry !== null && !Array.isArray(entry)) {
        const path = await resolveTranscript(dir, entry as Record<string, unknown>, names);
        if (path) {
          referenced.add(path);
          src.transcript = jsonlTranscript(path, topicOf(path, String((entry as Record<string, unknown>).sessionId)));
        }
      }
      sessions.push(src);
    }
  }

  // Transcripts no entry points at cannot be given a session key: report them.
  for (const [dir, names] of dirNames) {
    for (const name of [...names].sort()) {
      const path = join(dir, name);
      if (name.endsWith(".jsonl") && !referenced.has(path) && !referenced.has(await realpath(path).catch(() => path))) {
        skips.push({ reason: "orphan_transcript", source: path, detail: "no session entry refers to this transcript" });
      }
    }
  }
  return { sessions, skips, stores, close: async () => {} };
}
