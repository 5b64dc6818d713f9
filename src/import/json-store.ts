/**
 * The JSON generation of OpenClaw's state (Clawdbot, and OpenClaw before its SQLite store):
 * `agents/<agentId>/sessions/sessions.json` (a map of session key → entry) with one JSONL
 * transcript per session next to it, `<sessionId>.jsonl` or, for topics,
 * `<sessionId>-topic-<topicId>.jsonl`. Old single-agent installs kept one store at
 * `sessions/sessions.json`; a `sessions.json` directly in the given directory (a fixed
 * `session.store`) is read the same way. Read only.
 */
import { createReadStream } from "node:fs";
import { readFile, readdir, readlink, realpath, stat } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import { isValidAgentId } from "../session/agent-id.js";
import { isSafeSessionId } from "../session/session-id.js";
import { listAgentDirs } from "./agent-dirs.js";
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
  const { dirs, broken } = await listAgentDirs(stateDir);
  for (const b of broken) skips.push({ reason: "bad_agent_dir", source: b.path, detail: b.detail });
  for (const d of dirs) {
    const file = join(d.path, "sessions", "sessions.json");
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

/** A sessions directory as the scan reads it: its path, its real path and its file names. */
interface SessionsDir {
  dir: string;
  /** After resolving symlinks (an agent directory linked from another disk): what "inside" means. */
  real: string;
  names: Set<string>;
  /** sessionId → its first topic transcript (by name), built once per directory. */
  topics: Map<string, string>;
}

const TOPIC_MARK = "-topic-";

/**
 * sessionId → the topic transcript OpenClaw would pick for it (`<sessionId>-topic-<id>.jsonl`,
 * the first by name), in one pass over the names. A name holding `-topic-` more than once is
 * listed under each prefix, as a prefix test per sessionId would find it.
 */
export function indexTopicFiles(names: Iterable<string>): Map<string, string> {
  const first = new Map<string, string>();
  for (const name of names) {
    if (!name.endsWith(".jsonl")) continue;
    for (let at = name.indexOf(TOPIC_MARK); at > 0; at = name.indexOf(TOPIC_MARK, at + 1)) {
      const sessionId = name.slice(0, at);
      const held = first.get(sessionId);
      if (held === undefined || name < held) first.set(sessionId, name);
    }
  }
  return first;
}

function isInside(realDir: string, real: string): boolean {
  const rel = relative(realDir, real);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}

/** Where an entry's transcript is, or a link the scan will not follow (the session is then skipped). */
type Lookup = { file: string } | { link: { file: string; detail: string } } | undefined;

/**
 * A file of the sessions directory, checked: a symlink out of the directory (OpenClaw ignores a
 * sessionFile that escapes) or to nothing is not read, and the caller is told which and where to.
 */
async function inDir(sd: SessionsDir, name: string): Promise<Lookup> {
  const file = join(sd.dir, name);
  let real: string;
  try {
    real = await realpath(file);
  } catch {
    const target = await readlink(file).catch(() => undefined);
    // Gone since the directory was listed, and not a link: no transcript, like any missing one.
    if (target === undefined) return undefined;
    return {
      link: {
        file,
        detail:
          `the transcript is a symlink to ${target}, which does not exist: the session is not ` +
          "imported (restore the file and run the import again)",
      },
    };
  }
  if (isInside(sd.real, real)) return { file: real };
  return {
    link: {
      file,
      detail:
        `the transcript is a symlink to ${real}, outside ${sd.dir}: links out of a sessions ` +
        "directory are not followed, so the session is not imported (put the file itself in the " +
        "directory and run the import again)",
    },
  };
}

/** Inside the directory after resolving symlinks, for a path not listed in it (a sessionFile). */
async function insideDir(sd: SessionsDir, file: string): Promise<string | undefined> {
  try {
    const real = await realpath(file);
    return isInside(sd.real, real) ? real : undefined;
  } catch {
    return undefined;
  }
}

function topicOf(file: string, sessionId: string): string | undefined {
  const name = basename(file);
  const prefix = `${sessionId}${TOPIC_MARK}`;
  if (!name.startsWith(prefix) || !name.endsWith(".jsonl")) return undefined;
  const raw = name.slice(prefix.length, -".jsonl".length);
  if (raw === "") return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * The transcript of one entry, as OpenClaw resolves it: an explicit `sessionFile` (relative
 * to the sessions dir, or absolute but inside it; a path from another machine is tried by
 * its file name), else `<sessionId>.jsonl`, else the session's topic file.
 */
async function resolveTranscript(sd: SessionsDir, entry: Record<string, unknown>): Promise<Lookup> {
  const sessionFile = typeof entry.sessionFile === "string" ? entry.sessionFile.trim() : "";
  if (sessionFile) {
    const direct = await insideDir(sd, resolve(sd.dir, sessionFile));
    if (direct) return { file: direct };
    const byName = basename(sessionFile);
    // Every candidate is checked the same way: a file of the dir that is a symlink out of it is not read.
    if (sd.names.has(byName)) return await inDir(sd, byName);
  }
  const sessionId = entry.sessionId;
  if (!isSafeSessionId(sessionId)) return undefined;
  if (sd.names.has(`${sessionId}.jsonl`)) return await inDir(sd, `${sessionId}.jsonl`);
  const topic = sd.topics.get(sessionId);
  return topic ? await inDir(sd, topic) : undefined;
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

export interface JsonScanOptions {
  defaultAgentId: string;
  /** Called as entries are read, with the number read so far (the scan of a big store takes a while). */
  onProgress?: (entries: number) => void;
  /** Stops the scan between entries (Ctrl-C). */
  signal?: AbortSignal;
}

/** Reads every JSON-generation store under `stateDir`. Unreadable stores are skipped and reported. */
export async function scanJsonStores(stateDir: string, opts: JsonScanOptions): Promise<StoreScan> {
  const skips: Skip[] = [];
  const sessions: SourceSession[] = [];
  const stores: string[] = [];
  const referenced = new Set<string>();
  /** Links the scan would not follow: reported with their session, not again as orphans. */
  const refused = new Set<string>();
  const dirs = new Map<string, SessionsDir>();
  let entries = 0;

  for (const { file, agentId } of await locateStores(stateDir, opts.defaultAgentId, skips)) {
    opts.signal?.throwIfAborted();
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
    let sd = dirs.get(dir);
    if (!sd) {
      const names = new Set(await readdir(dir).catch(() => []));
      sd = { dir, real: await realpath(dir).catch(() => dir), names, topics: indexTopicFiles(names) };
      dirs.set(dir, sd);
    }
    for (const [rawKey, entry] of Object.entries(parsed as Record<string, unknown>)) {
      opts.signal?.throwIfAborted();
      opts.onProgress?.(++entries);
      const src: SourceSession = {
        generation: "json",
        store: file,
        storeAgentId: agentId,
        rawKey,
        entry,
        fallbackUpdatedAt: Math.floor(mtime),
      };
      if (typeof entry === "object" && entry !== null && !Array.isArray(entry)) {
        const found = await resolveTranscript(sd, entry as Record<string, unknown>);
        if (found && "link" in found) {
          refused.add(found.link.file);
          skips.push({ reason: "linked_transcript", source: found.link.file, key: rawKey, detail: found.link.detail });
          continue;
        }
        if (found) {
          referenced.add(found.file);
          src.transcript = jsonlTranscript(
            found.file,
            topicOf(found.file, String((entry as Record<string, unknown>).sessionId)),
          );
        }
      }
      sessions.push(src);
    }
  }

  // Transcripts no entry points at cannot be given a session key: report them.
  for (const { dir, names } of dirs.values()) {
    for (const name of [...names].sort()) {
      const path = join(dir, name);
      if (!name.endsWith(".jsonl") || referenced.has(path) || refused.has(path)) continue;
      if (referenced.has(await realpath(path).catch(() => path))) continue;
      skips.push({ reason: "orphan_transcript", source: path, detail: "no session entry refers to this transcript" });
    }
  }
  return { sessions, skips, stores, close: async () => {} };
}
