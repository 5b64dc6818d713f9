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
 *   finished turns may not be durable, and operators must hear of it. A name whose directory
 *   fsync failed (or never ran: its file's fsync failed) is tried again at every group commit
 *   until it is done, each failure reported too.
 * File handles stay open while written to and are closed after a short idle time, so a
 * session's consecutive turns reuse one handle. They are capped, least recently used closed
 * first (fsynced first when dirty), and an open out of descriptors closes the idle ones and
 * tries once more: handle-cap.ts.
 */
import { statSync } from "node:fs";
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { TranscriptEntry } from "../history/transcript-types.js";
import { transcriptPath } from "./paths.js";
import { eachLimited } from "./each-limited.js";
import { appendOrUndo, closeTornTail, headerLine, syncDir } from "./file-ops.js";
import { HandleCap } from "./handle-cap.js";
import { LogThrottle } from "./log-throttle.js";
import { readTail } from "./tail-reader.js";

export type FsyncMode = "always" | "everysec";

/** What the writer tells its owner (metrics, storage health); every member optional. */
export interface WriterEvents {
  /** An fsync done: of a transcript file, or of a directory that got a new name. */
  synced?(target: "file" | "dir"): void;
  /** A background fsync failed (group commit, closing): acknowledged lines may not be durable. */
  syncFailed?(file: string, err: Error): void;
}

/** Bounds of one writer (tests set them; the defaults suit a worker). */
export interface WriterLimits {
  /** Transcript handles open at most (default: maxOpenFilesFor the process's open-file limit, handle-cap.ts). */
  maxOpenFiles?: number;
}

/** Options of one write. */
export interface WriteOptions {
  topicId?: string | number | undefined;
  /** Throws unless the lease is surely still held; called right before the bytes go out. */
  assertHeld?: (() => void) | undefined;
}

interface OpenFile {
  /** The path it was opened for (its key in the map while it is there). */
  file: string;
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
  /** Callers using the handle now (a write, an fsync): it is never closed while it has one. */
  users: number;
  /**
   * Out of the map for good (a failed fsync or write, closing): writes not yet begun on it go to
   * a new handle, and it is closed by its last user's done() (see closeHandle).
   */
  retired: boolean;
  /** Its closing, once begun (once: the cap's count of open handles goes down once). */
  closing: Promise<void> | undefined;
}

const SYNC_EVERY_MS = 1000;
/**
 * fsyncs of one group commit under way at once: one after another, 1,000 files of 2 ms each
 * took two seconds, so lines waited up to five for the fsync promised within about one.
 */
const SYNC_PARALLEL = 32;

/** The cached handle no longer names the file at its path (renamed or deleted meanwhile). */
class StaleHandle extends Error {}
const IDLE_CLOSE_MS = 5000;
/** At most one "fsync failed" log line per file per this long (each failure is still reported). */
const FAIL_LOG_EVERY_MS = 60_000;
/** Transcript paths remembered (see path); the map starts over past this many sessions. */
const MAX_CACHED_PATHS = 10_000;
export class HolderWriter {
  /** The open handles, least recently used first, under their cap. */
  private readonly cap: HandleCap<OpenFile>;
  private readonly paths = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;
  /**
   * Directories owed an fsync, each with the number of the last name owed in it (see owe): the
   * parents of directories made for a new file (done before the file's name counts as durable),
   * and a new file's own directory whose fsync failed or was never tried (its file's fsync
   * failed). Under `everysec` each group commit tries them again until done (syncOwedDirs): the
   * name's fsync goes with its file's first one, and the next handle on the file finds it not new,
   * so a power loss could take the whole file while the group commits of its later lines succeed.
   */
  private readonly owedDirs = new Map<string, number>();
  private owedCount = 0;
  /** Directory fsyncs under way or scheduled, per directory (see syncDirOf). */
  private readonly dirSyncs = new Map<string, { tail: Promise<void>; waiting: Promise<void> | undefined }>();
  /** The group commit running, if one is; a tick meanwhile asks for another right after it. */
  private ticking: Promise<void> | undefined;
  private readonly failLogs = new LogThrottle(FAIL_LOG_EVERY_MS);
  private tickAgain = false;

  constructor(
    private readonly storageDir: string,
    private readonly fsync: FsyncMode,
    private readonly log?: Logger,
    private readonly events: WriterEvents = {},
    limits: WriterLimits = {},
  ) {
    this.cap = new HandleCap<OpenFile>(
      limits.maxOpenFiles,
      { close: (file) => this.closeFile(file), failed: (file, err) => this.syncFailed(file, err) },
      log,
    );
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
      // Retired while this write waited (a group commit's fsync or the write before it failed,
      // the handle is being closed): it goes to a new handle, as for a renamed file below.
      if (f.retired) throw new StaleHandle();
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
      if (onDisk.size !== f.size) {
        // Belt and braces: a handle closed under this write (never meant to happen: closing
        // waits for its users) has written nothing here that a retry would not redo.
        f.size = await closeTornTail(f.fh, onDisk.size, sessionId).catch((err: unknown) => {
          throw f.closing ? new StaleHandle() : err;
        });
      }
      const size = f.size;
      const buf = Buffer.from(size === 0 ? headerLine(sessionId, undefined) + body : body, "utf8");
      // Checked again here: opening, the stat and closing off a torn tail may have taken a while.
      opts.assertHeld?.();
      // Belt and braces as above: nothing written yet, so a new handle can take these lines.
      if (f.retired || f.closing) throw new StaleHandle();
      const always = this.fsync === "always";
      try {
        await appendOrUndo(f.fh, buf, size, always);
        if (always) this.events.synced?.("file");
        if (always && f.newName) await this.syncName(file, f);
      } catch (err) {
        await this.drop(file, f);
        throw err;
      }
      f.size = size + buf.length;
      f.dirty = !always;
      f.lastUse = Date.now();
    });
    f.chain = run.catch(() => undefined);
    let stale = false;
    try {
      await run;
    } catch (err) {
      if (!(err instanceof StaleHandle)) throw err;
      stale = true;
      void this.closeHandle(f); // retired: closed (its lines fsynced first) once nobody uses it
    } finally {
      // Before the retry: at the cap, a new handle may have to wait for this one to close.
      this.done(f);
    }
    if (!stale) return;
    await f.closing;
    await this.write(agentId, sessionId, entries, opts);
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
    const f = this.cap.get(file);
    if (f) {
      f.users++;
      try {
        await this.flushFile(file, f);
      } finally {
        this.done(f);
      }
    }
    const { entries } = await this.cap.withFds(() => readTail(file, 10_000, { stopAt: (e) => e.runId !== runId }));
    // Under `always` these lines count only once durable, their file's name too: the attempt
    // that wrote them may have died (in another process) or failed between its write and its
    // fsyncs (a directory fsync refused for want of descriptors, say).
    if (entries.length > 0 && this.fsync === "always") await this.syncNow(file);
    return entries;
  }

  /** fsync (if dirty) and close the handle of `file`, e.g. before the file is renamed. */
  async release(agentId: string, sessionId: string, topicId?: string | number): Promise<void> {
    await this.closeFile(this.path(agentId, sessionId, topicId));
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
    await Promise.all(this.cap.entries().map(([f]) => this.closeFile(f)));
    // The last chance for names a group commit still owes: nothing tries them after this.
    if (this.fsync === "everysec") await this.syncOwedDirs();
  }

  /**
   * The handle of `file`, opened if need be, marked used (see done) and most recently used.
   * Opening one at the cap first closes the least recently used idle handle.
   */
  private async handle(file: string): Promise<OpenFile> {
    const known = this.cap.get(file);
    if (known) return this.cap.use(known);
    await this.cap.makeRoom();
    let fh: FileHandle;
    try {
      fh = await this.openFile(file);
    } catch (err) {
      this.cap.unreserve();
      throw err;
    }
    // The file the handle names, to notice a rename or replacement later (see write).
    const st = await fh.stat().catch(async (err: unknown) => {
      await fh.close().catch(() => undefined);
      this.cap.unreserve();
      throw err;
    });
    const again = this.cap.get(file); // opened concurrently by another turn of this process
    if (again) {
      this.cap.use(again);
      await fh.close().catch(() => undefined);
      this.cap.unreserve();
      return again;
    }
    // size -1: not checked yet, so the first write looks for a torn tail.
    const f: OpenFile = {
      file,
      fh,
      dirty: false,
      lastUse: Date.now(),
      chain: Promise.resolve(),
      size: -1,
      ino: st.ino,
      dev: st.dev,
      newName: st.size === 0,
      users: 1,
      retired: false,
      closing: undefined,
    };
    this.cap.add(f);
    return f;
  }

  /** One user less; the last one closes `f` if it was retired, else a caller waiting for room may. */
  private done(f: OpenFile): void {
    if (this.cap.done(f)) void this.closeHandle(f);
  }

  /** Open `file` for appending, making its directories (owed an fsync: see syncName) if missing. */
  private async openFile(file: string): Promise<FileHandle> {
    try {
      return await this.cap.withFds(() => open(file, "a+", 0o600));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const first = await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    // The directories just made are new names in their parents: durable before the file is,
    // which is when the file's own name is (syncName), also if this attempt fails and the
    // next one finds them made.
    for (const dir of madeDirs(first, dirname(file))) this.owe(dir);
    return await this.cap.withFds(() => open(file, "a+", 0o600));
  }

  /** fsync `file` if its handle is dirty (after the writes queued on it). */
  private async flushFile(file: string, f: OpenFile): Promise<void> {
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

  /** fsync `file` and its name now, through its handle (opened if need be), whatever it holds. */
  private async syncNow(file: string): Promise<void> {
    const f = await this.handle(file);
    try {
      await f.chain;
      await f.fh.sync();
      this.events.synced?.("file");
      await this.syncName(file, f);
    } finally {
      this.done(f);
    }
  }

  /** fsync the handle's file, and its name too while that is new. */
  private async syncHandle(file: string, f: OpenFile): Promise<void> {
    try {
      await f.fh.sync();
    } catch (err) {
      // The name's fsync, which comes with this one, is owed: retried by the next group commit.
      if (f.newName) this.owe(dirname(file));
      throw err;
    }
    this.events.synced?.("file");
    if (f.newName) await this.syncName(file, f);
  }

  /**
   * The file's name is durable once its directory is fsynced, and the directories above it
   * that were made for it once theirs are. Throws when one cannot be: the caller's lines do
   * not count as durable (`always`) or the failure is reported (group commit). Either way the
   * directory stays owed: a re-run (`always`) or the next group commit (`everysec`) tries again.
   * Only the directories on this file's path are its business: another agent's owed directory
   * (an `EIO` or `EACCES` there) failed every other agent's new sessions and re-runs under
   * `always`. Those are left to their own file's re-run or next new file, or to the group commit.
   */
  private async syncName(file: string, f: OpenFile): Promise<void> {
    const own = dirname(file);
    try {
      for (const dir of ancestors(own)) {
        const n = this.owedDirs.get(dir);
        if (n !== undefined) await this.syncOwed(dir, n);
      }
      const n = this.owedDirs.get(own);
      await this.syncDirOf(own);
      if (n !== undefined) this.paid(own, n);
    } catch (err) {
      this.owe(own);
      throw err;
    }
    f.newName = false;
  }

  /** A name made in `dir` is not known durable yet: `dir` is owed an fsync. */
  private owe(dir: string): void {
    this.owedDirs.set(dir, ++this.owedCount);
  }

  /**
   * `dir` was fsynced by an fsync begun after its owed number `n` was read (syncDirOf never
   * hands out one already under way): it owes nothing more, unless a name was owed in it since.
   */
  private paid(dir: string, n: number): void {
    if (this.owedDirs.get(dir) === n) this.owedDirs.delete(dir);
  }

  /** fsync an owed directory (owed number `n`); throws, and it stays owed, when that fails. */
  private async syncOwed(dir: string, n: number): Promise<void> {
    try {
      await this.syncDirOf(dir);
    } catch (err) {
      // Removed since (an archived agent, `rm -rf` of the storage): no name to make durable.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    this.paid(dir, n);
  }

  /**
   * Every owed directory fsynced again (group commit), SYNC_PARALLEL at once; one that fails is
   * reported as any failed group-commit fsync (storage health, metric) and stays owed for the
   * next pass. Out of descriptors (the likely cause) the failed fsync never ran; after an I/O
   * error a retry is the best left, the failure having been reported.
   */
  private async syncOwedDirs(): Promise<void> {
    await eachLimited([...this.owedDirs], SYNC_PARALLEL, ([dir, n]) =>
      this.syncOwed(dir, n).catch((err: Error) => this.syncFailed(dir, err)),
    );
  }

  /**
   * fsync `dir`, shared: a directory fsync makes durable every name made in it before it began,
   * so a caller finding one scheduled and not yet begun joins it, and one finding it under way
   * schedules the next (which callers after it join). A burst of new sessions in one directory
   * costs two or three directory fsyncs, not one per file (and one descriptor per file at once).
   */
  private syncDirOf(dir: string): Promise<void> {
    let s = this.dirSyncs.get(dir);
    if (s === undefined) {
      s = { tail: Promise.resolve(), waiting: undefined };
      this.dirSyncs.set(dir, s);
    }
    if (s.waiting) return s.waiting;
    const state = s;
    const next: Promise<void> = state.tail.then(noop, noop).then(async () => {
      state.waiting = undefined; // begun: a name made from now on needs the next one
      if (await this.cap.withFds(() => syncDir(dir))) this.events.synced?.("dir");
    });
    state.waiting = next;
    state.tail = next;
    const forget = () => {
      if (state.tail === next && this.dirSyncs.get(dir) === state) this.dirSyncs.delete(dir);
    };
    next.then(forget, forget);
    return next;
  }

  /** fsync (if dirty) and close the handle of `file`; one somebody still uses closes after them. */
  private async closeFile(file: string): Promise<void> {
    const f = this.cap.get(file);
    if (!f) return;
    f.retired = true;
    this.cap.remove(f);
    f.users++; // its own fsync under way: not closed by another user's done() meanwhile
    try {
      await f.chain;
      if (f.dirty) {
        f.dirty = false;
        await this.syncHandle(file, f);
      } else if (f.newName) await this.syncName(file, f);
    } finally {
      f.users--;
      await this.closeHandle(f);
    }
  }

  /**
   * Retire `f` (out of the map: the next writer opens a new handle) and close it, or, while
   * somebody uses it, leave that to its last user's done(): closing a descriptor a write or an
   * fsync is about to use fails that (`fd` -1), and a turn failed so does not count as a storage
   * fault. Lines written on it since its last fsync (one landing while a group commit's fsync
   * failed, say) are fsynced first: nothing else would.
   */
  private closeHandle(f: OpenFile): Promise<void> {
    this.cap.remove(f);
    f.retired = true;
    if (f.users > 0) return Promise.resolve();
    f.closing ??= (async () => {
      if (f.dirty) {
        f.dirty = false;
        await this.syncHandle(f.file, f).catch((err: Error) => this.syncFailed(f.file, err));
      }
      await f.fh.close().catch(() => undefined);
      this.cap.unreserve();
    })();
    return f.closing;
  }

  /**
   * Forget the handle `f` of `file` (a failed write). Lines it wrote since the last group
   * commit are fsynced first: the next handle on the file may never be synced.
   */
  private async drop(file: string, f: OpenFile): Promise<void> {
    if (this.cap.get(file) !== f) return; // retired already (released, or dropped before)
    this.cap.remove(f);
    f.retired = true;
    if (f.dirty) {
      f.dirty = false;
      await this.syncHandle(file, f).catch((err: Error) => this.syncFailed(file, err));
    }
    await this.closeHandle(f);
  }

  private syncFailed(file: string, err: Error): void {
    // Reported every time (metric, storage health); logged once a minute per file: a directory
    // fsync that keeps failing is tried again every second (syncOwedDirs).
    const { log, suppressed } = this.failLogs.take(file, Date.now());
    if (log)
      this.log?.error(
        { file, err: err.message, ...(suppressed ? { suppressed } : {}) },
        "transcript fsync failed: lines of finished turns may not be durable",
      );
    this.events.syncFailed?.(file, err);
  }

  /**
   * The timer's group commit. Never two at once: a tick while one runs (fsyncs slower than the
   * interval) asks for another pass right after it, which takes every file written meanwhile.
   */
  private tick(): Promise<void> {
    if (this.ticking) {
      this.tickAgain = true;
      return this.ticking;
    }
    const run = async () => {
      do {
        this.tickAgain = false;
        await this.groupCommit();
      } while (this.tickAgain);
    };
    const ticking = run().finally(() => {
      this.ticking = undefined;
    });
    this.ticking = ticking;
    return ticking;
  }

  /**
   * One fsync per written file (SYNC_PARALLEL at once); handles idle for IDLE_CLOSE_MS closed.
   * Under `everysec`, the directories owed an fsync first (a failed one is tried at every pass).
   */
  private async groupCommit(): Promise<void> {
    if (this.fsync === "everysec" && this.owedDirs.size > 0) await this.syncOwedDirs();
    const now = Date.now();
    const due = this.cap.entries().filter(([, f]) => f.dirty || now - f.lastUse > IDLE_CLOSE_MS);
    await eachLimited(due, SYNC_PARALLEL, ([file, f]) => this.commitFile(file, f, now));
  }

  private async commitFile(file: string, f: OpenFile, now: number): Promise<void> {
    if (this.cap.get(file) !== f) return; // closed meanwhile (made room, released, dropped)
    if (f.dirty) {
      f.users++; // not closed to make room while its fsync is under way
      try {
        await f.chain;
        // Cleared first: a write landing during the fsync marks the handle dirty again.
        f.dirty = false;
        await this.syncHandle(file, f);
      } catch (err) {
        // The turns whose lines this was are finished: say so loudly (the owner marks storage
        // unhealthy). The handle goes (the next write reopens it and closes off any torn tail);
        // the lines this fsync failed on are not fsynced again, since after a failed fsync the
        // kernel may report the next one as a success without having written the lost pages.
        // Only lines written during it (dirty again) are, when the handle closes. A write
        // using the handle now finishes first: closed by the last user (closeHandle).
        this.syncFailed(file, err as Error);
        void this.closeHandle(f);
        return;
      } finally {
        this.done(f);
      }
    }
    if (now - f.lastUse > IDLE_CLOSE_MS && f.users === 0 && this.cap.get(file) === f)
      await this.closeFile(file).catch((err: Error) => this.syncFailed(file, err));
  }
}

function noop(): void {}

/** The directories above `dir`, outermost first (those made for a file in `dir` among them). */
function ancestors(dir: string): string[] {
  const above: string[] = [];
  for (let d = dirname(dir); d !== dir; dir = d, d = dirname(d)) above.unshift(d);
  return above;
}

/** The directories `mkdir -p` made: from `first` (its answer; undefined: none) down to `dir`. */
function madeDirs(first: string | undefined, dir: string): string[] {
  if (first === undefined) return [];
  const made = [dir];
  while (made[0] !== first && dirname(made[0]!) !== made[0]) made.unshift(dirname(made[0]!));
  // Each is a new name in its parent; `dir` also gets the file's name, synced with the file.
  return made.map((d) => dirname(d));
}
