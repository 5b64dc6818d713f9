/**
 * Append-only JSONL transcripts on SHARED storage, written by workers on many hosts.
 *
 * This is the locked store, for writers that do not hold the session's lease (forking a
 * transcript for a sub-agent, imports, archiving). A session's turns are written by its lease
 * holder through holder-writer.ts, which needs no lock; both share file-ops.ts.
 *
 * 1. Writers of one transcript are serialised by the transcript lock (transcript-lock.ts: a
 *    FIFO-fair Redis lock plus an in-process chain).
 * 2. Under the lock, the index hash (RedisKeys.transcriptIndex: `size`, `file`) says how many
 *    bytes of the file are indexed and the ids set (RedisKeys.transcriptIds) holds their entry
 *    ids. If the file is longer than `size` (a writer crashed after writing, before indexing)
 *    only that tail is read and indexed ("reconcile"); if the index is missing, belongs to
 *    another file or is longer than the file, it is rebuilt from byte 0.
 * 3. An optional fencing token is checked under the lock right before writing (stale session
 *    lease holders cannot write).
 * 4. New entries (ids not in the set, not repeated in the batch) are written with one write
 *    of whole lines, fsync'ed, then ids and the new `size` are committed atomically.
 *
 * Result: `append` is idempotent on `entry.id` across processes, hosts, retries and crashes.
 * Keys are per file stem: the file name without `.jsonl` (the sessionId, or
 * `<sessionId>-topic-<topic>`).
 *
 * The index is a cache of the file, so it expires `indexTtlMs` (15 minutes) after its last use:
 * an import of 2,000 sessions of 200 lines left 26.6 MB in Redis for good (about 66 bytes per
 * line). An append after that rebuilds it from byte 0 (one read of the file), under the lock as
 * any rebuild. Both keys always get the same expiry, refreshed by the append's first step
 * (txindex-open.lua), so it cannot lapse between reading the ids and writing the lines; a commit
 * that finds the index gone or reset moves nothing (txcommit.lua). A read without the lock
 * (`present`, txindex-read.lua) refreshes it too, so an index an older version left without an
 * expiry gets one when it is next read or opened.
 */
import { open, rename, stat, type FileHandle } from "node:fs/promises";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { ValidationError } from "../errors/index.js";
import { archivePath, transcriptFileName, transcriptPath, transcriptRelativePath, type ArchiveKind } from "./paths.js";
import { readLastEntries, scanLines } from "./tail-reader.js";
import { appendOrUndo, createWithHeader, closeTornTail, exists, nonEmpty } from "./file-ops.js";
import { TRANSCRIPT_LUA_DIR, TranscriptLock, type Fence, type LockKeys } from "./transcript-lock.js";
import { luaCommand } from "../storage/lua-script.js";
import type { TranscriptEntry, TranscriptMessage } from "../history/transcript-types.js";

export interface TranscriptStoreOptions {
  redis: RedisClient;
  /** This deployment's key layout (transcript keys share its hash tag with the session lease, for the fence). */
  keys: RedisKeys;
  /** Shared storage root (`storage.dir`). */
  storageDir: string;
  /** Transcript lock TTL. A crashed holder blocks the transcript at most this long. Default 10 s. */
  lockTtlMs?: number;
  /** How long `append`/`ensure`/`archive` wait for the lock before TranscriptLockError. Default 30 s (> TTL). */
  lockWaitMs?: number;
  /** How long a transcript's index stays in Redis after its last append. Default 15 minutes. */
  indexTtlMs?: number;
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
  fence?: Fence;
}

export interface AppendResult {
  /** Entries written by this call. */
  written: number;
  /** Entries skipped because their id was already in the transcript (or repeated in the batch). */
  skipped: number;
}

export interface TranscriptKeys extends LockKeys {
  /** Hash `size`, `file`: how many bytes of which file are indexed. */
  index: string;
  /** Set of the indexed entry ids. */
  ids: string;
}

/** Redis keys of one transcript (exported for tools and tests; the layout is internal). */
export function transcriptKeys(keys: RedisKeys, sessionId: string, topicId?: string | number): TranscriptKeys {
  const stem = transcriptFileName(sessionId, topicId).slice(0, -".jsonl".length);
  return {
    lock: keys.transcriptLock(stem),
    queue: keys.transcriptLockQueue(stem),
    heartbeats: keys.transcriptLockHeartbeats(stem),
    index: keys.transcriptIndex(stem),
    ids: keys.transcriptIds(stem),
  };
}

const DEFAULT_LOCK_TTL_MS = 10_000;
const DEFAULT_LOCK_WAIT_MS = 30_000;
/**
 * Long enough for every batch of one import or fork to find the index (and a second run soon
 * after), short enough that an import's index is gone the same hour.
 */
const DEFAULT_INDEX_TTL_MS = 15 * 60_000;
/** Ids per Redis command when indexing or checking membership (keeps commands small). */
const ID_CHUNK = 1000;
export class TranscriptStore {
  private readonly redis: RedisClient;
  private readonly keyLayout: RedisKeys;
  private readonly storageDir: string;
  private readonly lock: TranscriptLock;
  /** Commits new ids and the indexed size atomically, if the lock is still ours (txcommit.lua). */
  private readonly commit: ReturnType<typeof luaCommand>;
  /** Reads (resetting when foreign) and keeps alive the index (txindex-open.lua). */
  private readonly openIndex: ReturnType<typeof luaCommand>;
  /** Adds ids read from the file to the index (txindex-add.lua). */
  private readonly addIds: ReturnType<typeof luaCommand>;
  /** Reads the index without the lock, keeping it alive (txindex-read.lua). */
  private readonly readIndex: ReturnType<typeof luaCommand>;
  private readonly indexTtlMs: number;

  constructor(opts: TranscriptStoreOptions) {
    this.redis = opts.redis;
    this.keyLayout = opts.keys;
    this.storageDir = opts.storageDir;
    this.lock = new TranscriptLock(
      opts.redis,
      opts.lockTtlMs ?? DEFAULT_LOCK_TTL_MS,
      opts.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS,
    );
    this.commit = luaCommand(opts.redis, TRANSCRIPT_LUA_DIR, "txcommit");
    this.openIndex = luaCommand(opts.redis, TRANSCRIPT_LUA_DIR, "txindex-open");
    this.addIds = luaCommand(opts.redis, TRANSCRIPT_LUA_DIR, "txindex-add");
    this.readIndex = luaCommand(opts.redis, TRANSCRIPT_LUA_DIR, "txindex-read");
    this.indexTtlMs = opts.indexTtlMs ?? DEFAULT_INDEX_TTL_MS;
  }

  /** The transcript path (validates ids; throws a typed error instead of building a bad path). */
  path(agentId: string, sessionId: string, topicId?: string | number): string {
    return transcriptPath(this.storageDir, agentId, sessionId, topicId);
  }

  keys(sessionId: string, topicId?: string | number): TranscriptKeys {
    return transcriptKeys(this.keyLayout, sessionId, topicId);
  }

  /**
   * Create the transcript with its header line, exactly once however many processes race.
   * A file that already has content is left alone without taking the lock.
   */
  async ensure(
    agentId: string,
    sessionId: string,
    opts: EnsureOptions = {},
  ): Promise<{ path: string; created: boolean }> {
    const file = this.path(agentId, sessionId, opts.topicId);
    if (await nonEmpty(file)) return { path: file, created: false };
    const keys = this.keys(sessionId, opts.topicId);
    const created = await this.lock.run(keys, file, () => createWithHeader(file, sessionId, opts.parentSession));
    return { path: file, created };
  }

  /**
   * Append entries, idempotent on `entry.id` (see the module comment for the protocol).
   * The file is created with its header if missing. Throws ValidationError for an entry without
   * a string id/type, StaleFenceError for a stale fence (nothing written), TranscriptLockError
   * when the lock cannot be had (or was lost before writing; nothing written).
   */
  async append(
    agentId: string,
    sessionId: string,
    entries: TranscriptEntry[],
    opts: AppendOptions = {},
  ): Promise<AppendResult> {
    const file = this.path(agentId, sessionId, opts.topicId);
    const rel = transcriptRelativePath(agentId, sessionId, opts.topicId);
    const keys = this.keys(sessionId, opts.topicId);
    // Serialise before locking: a non-serialisable entry must fail before any I/O.
    const batch = uniqueBatch(entries);
    if (entries.length === 0) return { written: 0, skipped: 0 };

    return await this.lock.run(keys, file, async (token) => {
      // A stale writer must not even create the file (the new holder may have archived it).
      if (opts.fence && !(await nonEmpty(file))) await this.lock.guard(keys.lock, token, file, sessionId, opts.fence);
      await createWithHeader(file, sessionId, undefined);
      const fh = await open(file, "a+", 0o600); // O_APPEND; opening also revalidates NFS attributes
      try {
        // A write that failed part-way and could not be undone left a torn last line: close it off.
        const size = await closeTornTail(fh, (await fh.stat()).size, sessionId);
        const indexed = await this.reconcile(fh, size, keys, rel);
        const indexChanged = indexed !== size;

        const present = await this.membership(
          keys.ids,
          batch.map((b) => b.id),
        );
        const fresh = batch.filter((_, i) => !present[i]);
        const skipped = entries.length - fresh.length;

        if (fresh.length > 0 || opts.fence) await this.lock.guard(keys.lock, token, file, sessionId, opts.fence);
        if (fresh.length === 0) {
          if (indexChanged)
            await this.commit([keys.lock, keys.index, keys.ids], [token, size, rel, indexed, this.indexTtlMs]);
          return { written: 0, skipped };
        }

        const buf = Buffer.from(fresh.map((b) => b.line).join(""), "utf8");
        await appendOrUndo(fh, buf, size, true);
        // The new size is computed, not fstat'ed: had our lock expired and another writer
        // appended meanwhile, fstat would also count its bytes, whose ids we did not index.
        await this.commit(
          [keys.lock, keys.index, keys.ids],
          [token, size + buf.length, rel, indexed, this.indexTtlMs, ...fresh.map((b) => b.id)],
        );
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
  async messages(
    agentId: string,
    sessionId: string,
    limit: number,
    opts: TopicOption = {},
  ): Promise<TranscriptMessage[]> {
    const entries = await readLastEntries(this.path(agentId, sessionId, opts.topicId), limit, {
      filter: (e) => e.type === "message" && typeof e.message === "object" && e.message !== null,
    });
    return entries.map((e) => e.message as TranscriptMessage);
  }

  /**
   * Whether the index holds `id`. Cheap (SISMEMBER) and does not reconcile: a line written by a
   * writer that crashed before indexing is seen only after the next append reconciles, and none
   * once the index has expired (`indexTtlMs` after the last append). See `present`.
   */
  async hasEntry(sessionId: string, id: string, opts: TopicOption = {}): Promise<boolean> {
    return (await this.redis.sismember(this.keys(sessionId, opts.topicId).ids, id)) === 1;
  }

  /**
   * Which of `ids` the transcript holds, writing nothing (an import's dry run): the index answers
   * for the bytes it covers, the file for the rest, all of it when the index has expired or is
   * foreign. Without the lock: an append under way may or may not be seen. Reading the index
   * keeps it alive, as an append does (txindex-read.lua).
   */
  async present(agentId: string, sessionId: string, ids: string[], opts: TopicOption = {}): Promise<boolean[]> {
    const file = this.path(agentId, sessionId, opts.topicId);
    const size = await stat(file).then(
      (st) => st.size,
      (err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return 0;
        throw err;
      },
    );
    if (size === 0 || ids.length === 0) return ids.map(() => false);
    const keys = this.keys(sessionId, opts.topicId);
    const [sizeField, fileField] = (await this.readIndex([keys.index, keys.ids], [this.indexTtlMs])) as [
      string | null,
      string | null,
    ];
    const indexed = sizeField === null ? NaN : Number(sizeField);
    const usable =
      Number.isSafeInteger(indexed) &&
      indexed >= 0 &&
      indexed <= size &&
      fileField === transcriptRelativePath(agentId, sessionId, opts.topicId);
    const out = usable ? await this.membership(keys.ids, ids) : ids.map(() => false);
    const from = usable ? indexed : 0;
    if (from < size) {
      const wanted = new Map<string, number[]>();
      ids.forEach((id, i) => {
        if (out[i]) return;
        const at = wanted.get(id);
        if (at) at.push(i);
        else wanted.set(id, [i]);
      });
      const fh = await open(file, "r");
      try {
        for await (const { entry } of scanLines(fh, from, size)) {
          for (const i of (entry && wanted.get(entry.id)) || []) out[i] = true;
        }
      } finally {
        await fh.close();
      }
    }
    return out;
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
    return await this.lock.run(keys, file, async () => {
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
   * Bring the index's ids up to the file's current `size` (the commit moves its `size`), and keep
   * it alive (txindex-open.lua). Returns the indexed size the commit moves from: the index's own,
   * or 0 when it was missing, foreign or impossible and is rebuilt from byte 0.
   */
  private async reconcile(fh: FileHandle, size: number, keys: TranscriptKeys, rel: string): Promise<number> {
    const indexed = Number(await this.openIndex([keys.index, keys.ids], [size, rel, this.indexTtlMs]));
    if (indexed === size) return indexed;
    let ids: string[] = [];
    for await (const { entry } of scanLines(fh, indexed, size)) {
      if (!entry) continue;
      ids.push(entry.id);
      if (ids.length >= ID_CHUNK) {
        await this.addIds([keys.index, keys.ids], [this.indexTtlMs, ...ids]);
        ids = [];
      }
    }
    if (ids.length) await this.addIds([keys.index, keys.ids], [this.indexTtlMs, ...ids]);
    return indexed;
  }

  private async membership(idsKey: string, ids: string[]): Promise<boolean[]> {
    const out: boolean[] = [];
    for (let i = 0; i < ids.length; i += ID_CHUNK) {
      const flags = await this.redis.smismember(idsKey, ...ids.slice(i, i + ID_CHUNK));
      for (const f of flags) out.push(f === 1);
    }
    return out;
  }
}

/** Validate and serialise a batch; repeated ids keep their first occurrence. */
function uniqueBatch(entries: TranscriptEntry[]): { id: string; line: string }[] {
  if (!Array.isArray(entries)) throw new ValidationError("entries must be an array");
  const seen = new Set<string>();
  const out: { id: string; line: string }[] = [];
  entries.forEach((e, i) => {
    if (e === null || typeof e !== "object" || typeof e.id !== "string" || e.id === "") {
      throw new ValidationError(`Transcript entry ${i} has no id`, [
        { path: `entries.${i}.id`, message: "required string" },
      ]);
    }
    if (typeof e.type !== "string" || e.type === "session") {
      throw new ValidationError(`Transcript entry ${i} has an invalid type`, [
        { path: `entries.${i}.type`, message: 'required string other than "session"' },
      ]);
    }
    if (seen.has(e.id)) return;
    seen.add(e.id);
    // JSON.stringify escapes every newline inside strings, so one entry is exactly one line.
    out.push({ id: e.id, line: `${JSON.stringify(e)}\n` });
  });
  return out;
}
