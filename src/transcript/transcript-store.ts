/**
 * Append-only JSONL transcripts on SHARED storage, written by workers on many hosts.
 *
 * This is the locked store, for writers that do not hold the session's lease (forking a
 * transcript for a sub-agent, imports, archiving). A session's turns are written by its lease
 * holder through holder-writer.ts, which needs no lock; both share file-ops.ts.
 *
 * Why this design (and not OpenClaw's `.lock` file): O_APPEND and `open(..., "wx")` lock files
 * are not reliable across NFS clients, and a crashed host leaves a lock file nobody can prove
 * stale. Redis is already the coordination point, so:
 *
 * 1. Writers of one transcript are serialised by a Redis lock `<prefix>:txlock:<stem>`
 *    (token `SET ... NX PX` inside a Lua script, compare-and-delete release), plus an
 *    in-process promise chain so one process does not fight itself over Redis. The lock is
 *    FIFO-fair: waiters queue in `<prefix>:txq:<stem>` (heartbeats in `<prefix>:txqhb:<stem>`)
 *    because a bare `SET NX` retry loop lets a busy process starve the others.
 * 2. Under the lock, `<prefix>:txidx:<stem>` (hash: `size`, `file`) says how many bytes of the
 *    file are indexed and `<prefix>:txids:<stem>` (set) holds their entry ids. If the file is
 *    longer than `size` (a writer crashed after writing, before indexing) only that tail is
 *    read and indexed ("reconcile"); if the index is missing, belongs to another file or is
 *    longer than the file, it is rebuilt from byte 0.
 * 3. An optional fencing token is checked under the lock right before writing (stale session
 *    lease holders cannot write).
 * 4. New entries (ids not in the set, not repeated in the batch) are written with one write
 *    of whole lines, fsync'ed, then ids and the new `size` are committed atomically.
 *
 * Result: `append` is idempotent on `entry.id` across processes, hosts, retries and crashes.
 * `<stem>` is the file name without `.jsonl`: the sessionId, or `<sessionId>-topic-<topic>`.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, rename, stat, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RedisClient } from "../storage/redis-client.js";
import { StaleFenceError, TranscriptLockError, ValidationError } from "../errors/index.js";
import {
  archivePath,
  transcriptFileName,
  transcriptPath,
  transcriptRelativePath,
  type ArchiveKind,
} from "./paths.js";
import { readLastEntries, scanLines } from "./tail-reader.js";
import { appendOrUndo, cutTornTail, headerLine, syncDir } from "./file-ops.js";
import { luaCommand } from "../storage/lua-script.js";
import { TRANSCRIPT_VERSION, type TranscriptEntry, type TranscriptHeader, type TranscriptMessage } from "../history/transcript-types.js";

export interface TranscriptStoreOptions {
  redis: RedisClient;
  /** Key prefix of this deployment (`redis.prefix` in the config). */
  prefix: string;
  /** Shared storage root (`storage.dir`). */
  storageDir: string;
  /** Transcript lock TTL. A crashed holder blocks the transcript at most this long. Default 10 s. */
  lockTtlMs?: number;
  /** How long `append`/`ensure`/`archive` wait for the lock before TranscriptLockError. Default 30 s (> TTL). */
  lockWaitMs?: number;
}

export interface TopicOption {
  /** Topic/thread transcript (`<sessionId>-topic-<topicId>.jsonl`). */
  topicId?: string | number;
}

export interface EnsureOptions extends TopicOption {
  /** Path of the parent transcript for forked sessions (written into the header). */
  parentSession?: string;
}

export interface AppendOptions extends TopicOption {
  /** Session-lease fence: `GET key` must equal `token` at write time, else StaleFenceError. */
  fence?: { key: string; token: number };
}

export interface AppendResult {
  /** Entries written by this call. */
  written: number;
  /** Entries skipped because their id was already in the transcript (or repeated in the batch). */
  skipped: number;
}

export interface TranscriptKeys {
  lock: string;
  /** Waiters for the lock, oldest first (zset token -> arrival ms). */
  queue: string;
  /** Waiters' last poll (zset token -> ms): a silent waiter is dropped from the queue. */
  heartbeats: string;
  index: string;
  ids: string;
}

/** Redis keys of one transcript (exported for tools and tests; the layout is internal). */
export function transcriptKeys(prefix: string, sessionId: string, topicId?: string | number): TranscriptKeys {
  const stem = transcriptFileName(sessionId, topicId).slice(0, -".jsonl".length);
  return {
    lock: `${prefix}:txlock:${stem}`,
    queue: `${prefix}:txq:${stem}`,
    heartbeats: `${prefix}:txqhb:${stem}`,
    index: `${prefix}:txidx:${stem}`,
    ids: `${prefix}:txids:${stem}`,
  };
}

const DEFAULT_LOCK_TTL_MS = 10_000;
const DEFAULT_LOCK_WAIT_MS = 30_000;
/** Ids per Redis command when indexing or checking membership (keeps commands small). */
const ID_CHUNK = 1000;
/** A lock waiter silent for this long is dropped from the queue (waiters poll every <= 25 ms). */
const WAITER_STALE_MS = 2000;

type GuardReply = [number, string];

/** This module's Lua scripts (./lua/*.lua), registered through the shared loader. */
const LUA_DIR = new URL("./lua/", import.meta.url);

function transcriptScripts(redis: RedisClient) {
  return {
    acquire: luaCommand(redis, LUA_DIR, "txlock-acquire"),
    leave: luaCommand(redis, LUA_DIR, "txlock-leave"),
    release: luaCommand(redis, LUA_DIR, "txlock-release"),
    guard: luaCommand(redis, LUA_DIR, "txguard"),
    commit: luaCommand(redis, LUA_DIR, "txcommit"),
  };
}

export class TranscriptStore {
  private readonly redis: RedisClient;
  private readonly lua: ReturnType<typeof transcriptScripts>;
  private readonly prefix: string;
  private readonly storageDir: string;
  private readonly lockTtlMs: number;
  private readonly lockWaitMs: number;
  /** Per-lock-key promise chains: appends of one process to one file run one at a time. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(opts: TranscriptStoreOptions) {
    this.redis = opts.redis;
    this.lua = transcriptScripts(opts.redis);
    this.prefix = opts.prefix;
    this.storageDir = opts.storageDir;
    this.lockTtlMs = opts.lockTtlMs ?? DEFAULT_LOCK_TTL_MS;
    this.lockWaitMs = opts.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  }

  /** The transcript path (validates ids; throws a typed error instead of building a bad path). */
  path(agentId: string, sessionId: string, topicId?: string | number): string {
    return transcriptPath(this.storageDir, agentId, sessionId, topicId);
  }

  keys(sessionId: string, topicId?: string | number): TranscriptKeys {
    return transcriptKeys(this.prefix, sessionId, topicId);
  }

  /**
   * Create the transcript with its header line, exactly once however many processes race.
   * A file that already has content is left alone without taking the lock.
   */
  async ensure(agentId: string, sessionId: string, opts: EnsureOptions = {}): Promise<{ path: string; created: boolean }> {
    const file = this.path(agentId, sessionId, opts.topicId);
    if (await nonEmpty(file)) return { path: file, created: false };
    const keys = this.keys(sessionId, opts.topicId);
    const created = await this.withLock(keys, file, () => createWithHeader(file, sessionId, opts.parentSession));
    return { path: file, created };
  }

  /**
   * Append entries, idempotent on `entry.id` (see the module comment for the protocol).
   * The file is created with its header if missing. Throws ValidationError for an entry without
   * a string id/type, StaleFenceError for a stale fence (nothing written), TranscriptLockError
   * when the lock cannot be had (or was lost before writing; nothing written).
   */
  async append(agentId: string, sessionId: string, entries: TranscriptEntry[], opts: AppendOptions = {}): Promise<AppendResult> {
    const file = this.path(agentId, sessionId, opts.topicId);
    const rel = transcriptRelativePath(agentId, sessionId, opts.topicId);
    const keys = this.keys(sessionId, opts.topicId);
    // Serialise before locking: a non-serialisable entry must fail before any I/O.
    const batch = uniqueBatch(entries);
    if (entries.length === 0) return { written: 0, skipped: 0 };

    return await this.withLock(keys, file, async (token) => {
      // A stale writer must not even create the file (the new holder may have archived it).
      if (opts.fence && !(await nonEmpty(file))) await this.guard(keys.lock, token, file, sessionId, opts.fence);
      await createWithHeader(file, sessionId, undefined);
      const fh = await open(file, "a+", 0o600); // O_APPEND; opening also revalidates NFS attributes
      try {
        // A write that failed part-way and could not be undone left a torn last line: cut it.
        const size = await cutTornTail(fh, (await fh.stat()).size, sessionId);
        const indexChanged = await this.reconcile(fh, size, keys, rel);

        const present = await this.membership(keys.ids, batch.map((b) => b.id));
        const fresh = batch.filter((_, i) => !present[i]);
        const skipped = entries.length - fresh.length;

        if (fresh.length > 0 || opts.fence) await this.guard(keys.lock, token, file, sessionId, opts.fence);
        if (fresh.length === 0) {
          if (indexChanged) await this.lua.commit([keys.lock, keys.index, keys.ids], [token, size, rel]);
          return { written: 0, skipped };
        }

        const buf = Buffer.from(fresh.map((b) => b.line).join(""), "utf8");
        await appendOrUndo(fh, buf, size, true);
        // The new size is computed, not fstat'ed: had our lock expired and another writer
        // appended meanwhile, fstat would also count its bytes, whose ids we did not index.
        await this.lua.commit([keys.lock, keys.index, keys.ids], [token, size + buf.length, rel, ...fresh.map((b) => b.id)]);
        return { written: fresh.length, skipped };
      } finally {
        await fh.close();
      }
    });
  }

  /** The last `limit` entries (header excluded), oldest first. Missing file → []. */
  async tail(agentId: string, sessionId: string, limit: number, opts: TopicOption = {}): Promise<TranscriptEntry[]> {
    return await readLastEntries(this.path(agentId, sessionId, opts.topicId), limit);
  }

  /**
   * The `message` objects of the last `limit` `type:"message"` entries, oldest first: exactly
   * what `chat.history` returns (the operators' view, README "HTTP API"). Use `tail` when entry ids are needed.
   */
  async messages(agentId: string, sessionId: string, limit: number, opts: TopicOption = {}): Promise<TranscriptMessage[]> {
    const entries = await readLastEntries(this.path(agentId, sessionId, opts.topicId), limit, {
      filter: (e) => e.type === "message" && typeof e.message === "object" && e.message !== null,
    });
    return entries.map((e) => e.message as TranscriptMessage);
  }

  /**
   * Whether the index holds `id`. Cheap (SISMEMBER) and does not reconcile: a line written by a
   * writer that crashed before indexing is seen only after the next append reconciles.
   */
  async hasEntry(sessionId: string, id: string, opts: TopicOption = {}): Promise<boolean> {
    return (await this.redis.sismember(this.keys(sessionId, opts.topicId).ids, id)) === 1;
  }

  /**
   * Move the transcript aside as `<file>.<kind>.<ts>` and drop its index, under the lock so no
   * append lands in between. A later ensure/append starts a fresh file and index. Returns the
   * archive path, or undefined when there was no file.
   */
  async archive(
    agentId: string,
    sessionId: string,
    kind: ArchiveKind,
    now: Date | number = new Date(),
    opts: TopicOption = {},
  ): Promise<string | undefined> {
    const file = this.path(agentId, sessionId, opts.topicId);
    const keys = this.keys(sessionId, opts.topicId);
    return await this.withLock(keys, file, async () => {
      if (!(await exists(file))) {
        await this.redis.del(keys.index, keys.ids);
        return undefined;
      }
      let t = typeof now === "number" ? now : now.getTime();
      let target = archivePath(file, kind, t);
      while (await exists(target)) target = archivePath(file, kind, ++t); // never overwrite an archive
      // Index first: a crash between the two leaves an index-less file, which is simply rebuilt.
      await this.redis.del(keys.index, keys.ids);
      await rename(file, target);
      return target;
    });
  }

  // ---- internals -------------------------------------------------------------------------

  /**
   * Bring the index up to the file's current `size`. Returns true when the index changed
   * (its `size` must then be committed even if nothing new is written).
   */
  private async reconcile(fh: FileHandle, size: number, keys: TranscriptKeys, rel: string): Promise<boolean> {
    const idx = await this.redis.hmget(keys.index, "size", "file");
    const indexed = idx[0] === null ? NaN : Number(idx[0]);
    let from = indexed;
    if (!Number.isSafeInteger(indexed) || indexed < 0 || indexed > size || idx[1] !== rel) {
      // Missing, foreign (another agent's file with the same sessionId) or impossible
      // (file replaced or truncated): rebuild from scratch.
      await this.redis.del(keys.index, keys.ids);
      from = 0;
    }
    if (from === size) return from !== indexed;
    let ids: string[] = [];
    for await (const { entry } of scanLines(fh, from, size)) {
      if (!entry) continue;
      ids.push(entry.id);
      if (ids.length >= ID_CHUNK) {
        await this.redis.sadd(keys.ids, ...ids);
        ids = [];
      }
    }
    if (ids.length) await this.redis.sadd(keys.ids, ...ids);
    return true;
  }

  private async membership(idsKey: string, ids: string[]): Promise<boolean[]> {
    const out: boolean[] = [];
    for (let i = 0; i < ids.length; i += ID_CHUNK) {
      const flags = await this.redis.smismember(idsKey, ...ids.slice(i, i + ID_CHUNK));
      for (const f of flags) out.push(f === 1);
    }
    return out;
  }

  private async guard(
    lockKey: string,
    token: string,
    file: string,
    sessionId: string,
    fence: AppendOptions["fence"],
  ): Promise<void> {
    const [code, current] = fence
      ? ((await this.lua.guard([lockKey, fence.key], [token, this.lockTtlMs, fence.token])) as GuardReply)
      : ((await this.lua.guard([lockKey], [token, this.lockTtlMs])) as GuardReply);
    if (code === 1) return;
    if (code === 0) throw new TranscriptLockError(file, this.lockTtlMs); // lock expired before the write
    const cur = current === "" || !Number.isFinite(Number(current)) ? null : Number(current);
    throw new StaleFenceError(sessionId, fence?.token ?? NaN, cur);
  }

  /** In-process chain, then the Redis lock, then `fn(token)`; always releases. */
  private async withLock<T>(keys: TranscriptKeys, file: string, fn: (token: string) => Promise<T>): Promise<T> {
    return await this.serial(keys.lock, async () => {
      const token = randomBytes(16).toString("hex");
      await this.acquire(keys, token, file);
      try {
        return await fn(token);
      } finally {
        // Best effort: if Redis is unreachable the lock expires after its TTL anyway.
        await this.lua.release([keys.lock], [token]).catch(() => 0);
      }
    });
  }

  private async serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(key) ?? Promise.resolve();
    const run = prev.then(() => fn());
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.chains.set(key, settled);
    void settled.then(() => {
      if (this.chains.get(key) === settled) this.chains.delete(key);
    });
    return await run;
  }

  /**
   * Take the FIFO lock (txlock-acquire.lua), polling until `lockWaitMs`. The head of the queue
   * polls every ~2 ms so a released lock is handed over quickly; the others poll more slowly
   * (their polls are also their heartbeats). Jitter keeps pollers from moving in lockstep.
   */
  private async acquire(keys: TranscriptKeys, token: string, file: string): Promise<void> {
    const started = Date.now();
    for (;;) {
      const place = (await this.lua.acquire([keys.lock, keys.queue, keys.heartbeats], [token, this.lockTtlMs, WAITER_STALE_MS])) as number;
      if (place < 0) return;
      const waited = Date.now() - started;
      if (waited >= this.lockWaitMs) {
        await this.lua.leave([keys.queue, keys.heartbeats], [token]).catch(() => 0);
        throw new TranscriptLockError(file, waited);
      }
      const base = Math.min(2 + place * 4, 20);
      await sleep(Math.max(1, Math.min(base * (0.75 + Math.random() / 2), this.lockWaitMs - waited)));
    }
  }
}

/** Validate and serialise a batch; repeated ids keep their first occurrence. */
function uniqueBatch(entries: TranscriptEntry[]): { id: string; line: string }[] {
  if (!Array.isArray(entries)) throw new ValidationError("entries must be an array");
  const seen = new Set<string>();
  const out: { id: string; line: string }[] = [];
  entries.forEach((e, i) => {
    if (e === null || typeof e !== "object" || typeof e.id !== "string" || e.id === "") {
      throw new ValidationError(`Transcript entry ${i} has no id`, [{ path: `entries.${i}.id`, message: "required string" }]);
    }
    if (typeof e.type !== "string" || e.type === "session") {
      throw new ValidationError(`Transcript entry ${i} has an invalid type`, [
        { path: `entries.${i}.type`, message: 'required string other than "session"' },
      ]);
    }
    if (seen.has(e.id)) return;
    seen.add(e.id);
    // JSON.stringify escapes every newline inside strings, so one entry is exactly one line.
    out.push({ id: e.id, line: JSON.stringify(e) + "\n" });
  });
  return out;
}

/**
 * Create `file` with its header line if it does not exist. Callers hold the transcript lock,
 * so the only race left is with a crash: an empty file (created, header never written) is
 * completed here. `wx` makes creation exclusive even if a lock was lost. Returns true if this
 * call wrote the header.
 */
async function createWithHeader(file: string, sessionId: string, parentSession: string | undefined): Promise<boolean> {
  if (await nonEmpty(file)) return false;
  const line = Buffer.from(headerLine(sessionId, parentSession), "utf8");
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  let fh: FileHandle;
  try {
    fh = await open(file, "wx", 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    fh = await open(file, "a", 0o600);
    if ((await fh.stat()).size > 0) {
      await fh.close();
      return false;
    }
  }
  try {
    await appendOrUndo(fh, line, 0, true);
  } finally {
    await fh.close();
  }
  await syncDir(dirname(file));
  return true;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

async function nonEmpty(file: string): Promise<boolean> {
  try {
    return (await stat(file)).size > 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
