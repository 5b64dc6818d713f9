/**
 * The transcript writer of a session's lease holder: the fast path every turn takes.
 *
 * Only the worker holding a session's lease runs its turns, and every other writer of a live
 * transcript (archiving on reset, the maintenance archive job) takes the same lease first. So
 * the holder needs no transcript lock and no Redis index: it appends straight to the file.
 * - One write per turn: the user line and the result lines go out together, `O_APPEND`, and
 *   the write is undone (truncated back) if it fails part-way; a torn tail left by a crash is
 *   closed off with a newline before the next write (file-ops.ts has the shared helpers).
 * - Exactly once: a turn is written once per attempt, and a re-run first reads the lines its
 *   run already has at the end of the file (`linesOfRun`), writing only the missing ones.
 * - Durability is a setting named like Redis's (docs/concepts/reliability.md):
 *   `always` fsyncs before the turn is finished; `everysec` (default) fsyncs each written file
 *   once a second (group commit), the promise Redis AOF `everysec` makes for BullMQ's own jobs.
 *   A killed worker loses nothing either way (the data is in the kernel); a power loss may lose
 *   the last second of lines under `everysec`.
 *   A new file's name is made durable too (its directory fsynced): before the turn is finished
 *   under `always`, with the next group commit under `everysec`. A re-run that finds lines an
 *   earlier attempt wrote (maybe another process, killed before its fsync) fsyncs them before
 *   they count under `always`. A failed group-commit fsync is reported (`syncFailed`): lines of
 *   finished turns may not be durable, and operators must hear of it.
 * File handles stay open while written to and are closed after a short idle time, so a
 * session's consecutive turns reuse one handle.
 */
import { statSync } from "node:fs";
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { TranscriptEntry } from "../history/transcript-types.js";
import { transcriptPath } from "./paths.js";
import { appendOrUndo, closeTornTail, headerLine, syncDir } from "./file-ops.js";
import { readTail } from "./tail-reader.js";

export type FsyncMode = "always" | "everysec";

/** What the writer tells its owner (metrics, storage health); every member optional. */
export interface WriterEvents {
  /** An fsync done: of a transcript file, or of a directory that got a new name. */
  synced?(target: "file" | "dir"): void;
  /** A background fsync failed (group commit, closing): acknowledged lines may not be durable. */
  syncFailed?(file: string, err: Error): void;
}

/** Options of one write. */
export interface WriteOptions {
  topicId?: string | number | undefined;
  /** Throws unless the lease is surely still held; called right before the bytes go out. */
  assertHeld?: (() => void) | undefined;
}

interface OpenFile {
  fh: FileHandle;
  dirty: boolean;
  lastUse: number;
  /** Writes to one file from this process run one at a time. */
  chain: Promise<void>;
  /** The file's length as this handle last wrote or checked it. */
  size: number;
  /** The file the handle was opened on: a path naming another one was renamed or replaced. */
  ino: number;
  dev: number;
  /** Opened empty (new, most likely): its directory is fsynced with its first sync. */
  newName: boolean;
}

const SYNC_EVERY_MS = 1000;

/** The cached handle no longer names the file at its path (renamed or deleted meanwhile). */
class StaleHandle extends Error {}
const IDLE_CLOSE_MS = 5000;
/** Transcript paths remembered (see path); the map starts over past this many sessions. */
const MAX_CACHED_PATHS = 10_000;

export class HolderWriter {
  private readonly files = new Map<string, OpenFile>();
  private readonly paths = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly storageDir: string,
    private readonly fsync: FsyncMode,
    private readonly log?: Logger,
    private readonly events: WriterEvents = {},
  ) {
    this.timer = setInterval(() => void this.tick(), SYNC_EVERY_MS);
    this.timer.unref();
  }

  path(agentId: string, sessionId: string, topicId?: string | number): string {
    // A pure function of its arguments (validation, resolve, the inside-the-dir check) asked
    // several times per turn for the same session: remembered, only for ids that passed.
    const key = `${agentId}/${sessionId}/${topicId === undefined ? "" : `${typeof topicId}:${topicId}`}`;
    let file = this.paths.get(key);
    if (file === undefined) {
      file = transcriptPath(this.storageDir, agentId, sessionId, topicId);
      if (this.paths.size >= MAX_CACHED_PATHS) this.paths.clear();
      this.paths.set(key, file);
    }
    return file;
  }

  /**
   * Append `entries` (already missing from the file: see linesOfRun) in one write. The file is
   * created with its header when new. Throws the file system's error (nothing left behind).
   */
  async write(agentId: string, sessionId: string, entries: TranscriptEntry[], opts: WriteOptions = {}): Promise<void> {
    const { topicId } = opts;
    if (entries.length === 0) return;
    const file = this.path(agentId, sessionId, topicId);
    const body = entries.map((e) => `${JSON.stringify(e)}\n`).join("");
    const f = await this.handle(file);
    const run = f.chain.then(async () => {
      // The path's own stat before every write, synchronous (a syscall, microseconds, no
      // thread-pool hop on a turn's path). Its inode says the handle still names the file at the
      // path: a file deleted or moved aside behind the open handle (an operator, a backup tool,
      // `rm -rf` of the storage) would otherwise take this and every later turn's lines while
      // the handle stays open, acknowledged and in no transcript. Its length catches lines
      // appended by someone else (`switchboard import` and a forked sessions_spawn append
      // through the locked store without the lease), and a torn tail left by a writer that died.
      const onDisk = statSync(file, { throwIfNoEntry: false });
      if (!onDisk || onDisk.ino !== f.ino || onDisk.dev !== f.dev) throw new StaleHandle();
      // Still exactly as long as this handle left it: nobody wrote since (every writer appends
      // whole lines or undoes its write, and a torn write would have changed the length).
      if (onDisk.size !== f.size) f.size = await closeTornTail(f.fh, onDisk.size, sessionId);
      const size = f.size;
      const buf = Buffer.from(size === 0 ? headerLine(sessionId, undefined) + body : body, "utf8");
      // Checked again here: opening, the stat and closing off a torn tail may have taken a while.
      opts.assertHeld?.();
      const always = this.fsync === "always";
      try {
        await appendOrUndo(f.fh, buf, size, always);
        if (always) this.events.synced?.("file");
        if (always && f.newName) await this.syncName(file, f);
      } catch (err) {
        await this.drop(file);
        throw err;
      }
      f.size = size + buf.length;
      f.dirty = !always;
      f.lastUse = Date.now();
    });
    f.chain = run.catch(() => undefined);
    try {
      await run;
    } catch (err) {
      if (!(err instanceof StaleHandle)) throw err;
      await this.drop(file);
      await this.write(agentId, sessionId, entries, opts);
    }
  }

  /**
   * The entries of run `runId` at the end of the file (a re-run's own earlier lines), oldest
   * first. Only the holder writes, so the run's lines are the last ones: reading stops at the
   * first older line.
   */
  async linesOfRun(
    agentId: string,
    sessionId: string,
    runId: string,
    topicId?: string | number,
  ): Promise<TranscriptEntry[]> {
    const file = this.path(agentId, sessionId, topicId);
    await this.flushFile(file);
    const { entries } = await readTail(file, 10_000, { stopAt: (e) => e.runId !== runId });
    // Under `always` these lines count only once durable: the attempt that wrote them may have
    // died (in another process) between its write and its fsync.
    if (entries.length > 0 && this.fsync === "always") await this.syncNow(file);
    return entries;
  }

  /** fsync (if dirty) and close the handle of `file`, e.g. before the file is renamed. */
  async release(agentId: string, sessionId: string, topicId?: string | number): Promise<void> {
    await this.closeFile(this.path(agentId, sessionId, topicId));
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.files.keys()].map((f) => this.closeFile(f)));
  }

  private async handle(file: string): Promise<OpenFile> {
    const open_ = this.files.get(file);
    if (open_) return open_;
    let fh: FileHandle;
    try {
      fh = await open(file, "a+", 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      const first = await mkdir(dirname(file), { recursive: true, mode: 0o700 });
      // The directories just made are new names in their parents: durable before the file is.
      for (const dir of madeDirs(first, dirname(file))) await this.syncDirOf(dir);
      fh = await open(file, "a+", 0o600);
    }
    // The file the handle names, to notice a rename or replacement later (see write).
    const st = await fh.stat().catch(async (err: unknown) => {
      await fh.close().catch(() => undefined);
      throw err;
    });
    const again = this.files.get(file); // opened concurrently by another turn of this process
    if (again) {
      await fh.close();
      return again;
    }
    // size -1: not checked yet, so the first write looks for a torn tail.
    const f: OpenFile = {
      fh,
      dirty: false,
      lastUse: Date.now(),
      chain: Promise.resolve(),
      size: -1,
      ino: st.ino,
      dev: st.dev,
      newName: st.size === 0,
    };
    this.files.set(file, f);
    return f;
  }

  private async flushFile(file: string): Promise<void> {
    const f = this.files.get(file);
    if (!f) return;
    await f.chain;
    if (f.dirty) {
      // Cleared first: a write landing during the fsync marks the handle dirty again.
      f.dirty = false;
      try {
        await this.syncHandle(file, f);
      } catch (err) {
        f.dirty = true;
        throw err;
      }
    }
  }

  /** fsync `file` now, through its handle (opened if need be), whatever it holds. */
  private async syncNow(file: string): Promise<void> {
    const f = await this.handle(file);
    await f.chain;
    await this.syncHandle(file, f);
  }

  /** fsync the handle's file, and its name too while that is new. */
  private async syncHandle(file: string, f: OpenFile): Promise<void> {
    await f.fh.sync();
    this.events.synced?.("file");
    if (f.newName) await this.syncName(file, f);
  }

  /** The file's name is durable once its directory is fsynced. */
  private async syncName(file: string, f: OpenFile): Promise<void> {
    await this.syncDirOf(dirname(file));
    f.newName = false;
  }

  private async syncDirOf(dir: string): Promise<void> {
    if (await syncDir(dir)) this.events.synced?.("dir");
  }

  private async closeFile(file: string): Promise<void> {
    const f = this.files.get(file);
    if (!f) return;
    this.files.delete(file);
    await f.chain;
    try {
      if (f.dirty) await this.syncHandle(file, f);
      else if (f.newName) await this.syncName(file, f);
    } finally {
      await f.fh.close().catch(() => undefined);
    }
  }

  /**
   * Forget the handle (a failed write, a renamed file, a failed fsync). Lines it wrote since the
   * last group commit are fsynced first: the next handle on the file may never be synced.
   */
  private async drop(file: string): Promise<void> {
    const f = this.files.get(file);
    if (!f) return;
    this.files.delete(file);
    if (f.dirty) await this.syncHandle(file, f).catch((err: Error) => this.syncFailed(file, err));
    await f.fh.close().catch(() => undefined);
  }

  private syncFailed(file: string, err: Error): void {
    this.log?.error({ file, err: err.message }, "transcript fsync failed: lines of finished turns may not be durable");
    this.events.syncFailed?.(file, err);
  }

  /** Group commit: one fsync per written file per interval; idle handles closed. */
  private async tick(): Promise<void> {
    const now = Date.now();
    for (const [file, f] of [...this.files]) {
      try {
        if (f.dirty) await this.flushFile(file);
        if (now - f.lastUse > IDLE_CLOSE_MS) await this.closeFile(file);
      } catch (err) {
        // The turns whose lines this was are finished: say so loudly (the owner marks storage
        // unhealthy). The handle goes (the next write reopens it and closes off any torn tail); it is
        // not fsynced again, since after a failed fsync the kernel may report the next one as
        // a success without having written the lost pages.
        this.syncFailed(file, err as Error);
        this.files.delete(file);
        await f.fh.close().catch(() => undefined);
      }
    }
  }
}

/** The directories `mkdir -p` made: from `first` (its answer; undefined: none) down to `dir`. */
function madeDirs(first: string | undefined, dir: string): string[] {
  if (first === undefined) return [];
  const made = [dir];
  while (made[0] !== first && dirname(made[0]!) !== made[0]) made.unshift(dirname(made[0]!));
  // Each is a new name in its parent; `dir` also gets the file's name, synced with the file.
  return made.map((d) => dirname(d));
}
