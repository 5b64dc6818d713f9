/**
 * The transcript handles one writer keeps open, least recently used first, and their cap.
 *
 * A handle stays open while its session is active, so a burst of new sessions once held one
 * descriptor each until every open failed with EMFILE, the process's sockets with them (the
 * gateway's in `switchboard start`). So handles are capped (a quarter of the process's open-file
 * limit): past the cap the least recently used handle that nothing is using is closed, or, with
 * all in use, an open waits for one to be released or closed. An open that still finds the
 * process out of descriptors (EMFILE, ENFILE) closes every idle handle and tries once more
 * before it counts as a storage fault. What a handle holds, and how it is closed (fsynced first
 * when dirty), is the owner's: holder-writer.ts.
 */
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import { eachLimited } from "./each-limited.js";
import { outOfFds } from "./file-ops.js";
import { LogThrottle } from "./log-throttle.js";

/** What the cap needs of a handle. */
export interface CappedHandle {
  /** The path it was opened for (its key in the map while it is there). */
  readonly file: string;
  /** Callers using the handle now (a write, an fsync): it is never closed while it has one. */
  users: number;
  /** Out of the map for good: closed by its last user (see done). */
  retired: boolean;
}

/** How the owner closes handles: `close` fsyncs (when dirty) and closes; `failed` reports its fsync's failure. */
export interface HandleCloser {
  close(file: string): Promise<void>;
  failed(file: string, err: Error): void;
}

/** The handle cap's bounds, and the cap when the process's open-file limit cannot be read. */
const MIN_OPEN_FILES = 16;
const MAX_OPEN_FILES = 4096;
const UNKNOWN_LIMIT_OPEN_FILES = 256;
/** At most one "out of file descriptors" warning per this long (the others are counted). */
const FD_WARN_EVERY_MS = 10_000;
/** Idle handles closed at once when out of descriptors (each may need an fsync first). */
const CLOSE_PARALLEL = 32;

/**
 * The process's open-file limit (RLIMIT_NOFILE, the soft one, which Node raises to the hard one
 * at start), or undefined when it cannot be read. Node has no getrlimit: Linux tells it in
 * /proc/self/limits, and elsewhere the diagnostic report has it (`userLimits.open_files`).
 */
export function openFileLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    if (m) return m[1] === "unlimited" ? Number.POSITIVE_INFINITY : Number(m[1]);
  } catch {
    // Not Linux: the report below.
  }
  try {
    const report = process.report.getReport() as { userLimits?: { open_files?: { soft?: unknown } } };
    const soft = report.userLimits?.open_files?.soft;
    if (typeof soft === "number") return soft;
    if (soft === "unlimited") return Number.POSITIVE_INFINITY;
  } catch {
    // No report (a restricted runtime): the fallback.
  }
  return undefined;
}

/**
 * The transcript handles one writer keeps open: a quarter of the process's descriptors, so the
 * rest stay for its sockets (Redis, HTTP clients of a gateway in the same process), other files
 * and the directories it fsyncs; at least 16, at most 4096 (closing one costs a reopen later).
 */
export function maxOpenFilesFor(limit: number | undefined): number {
  if (limit === undefined || !(limit > 0)) return UNKNOWN_LIMIT_OPEN_FILES;
  return Math.max(MIN_OPEN_FILES, Math.min(MAX_OPEN_FILES, Math.floor(limit / 4)));
}

export class HandleCap<H extends CappedHandle> {
  /** The open handles, least recently used first (a Map keeps insertion order: see use). */
  private readonly files = new Map<string, H>();
  private readonly maxOpen: number;
  /** Handles open or being opened (reserved) or being closed: what counts against maxOpen. */
  private opened = 0;
  /** Callers waiting for a handle to be released or closed (all in use at the cap). */
  private roomWaiters: (() => void)[] = [];
  private readonly fdWarns = new LogThrottle(FD_WARN_EVERY_MS);

  /** `maxOpen` undefined: maxOpenFilesFor the process's open-file limit. */
  constructor(
    maxOpen: number | undefined,
    private readonly closer: HandleCloser,
    private readonly log?: Logger,
  ) {
    this.maxOpen = Math.max(1, maxOpen ?? maxOpenFilesFor(openFileLimit()));
  }

  /** The handle open on `file`, if any (its place in the LRU order unchanged). */
  get(file: string): H | undefined {
    return this.files.get(file);
  }

  /** The open handles, least recently used first. */
  entries(): [string, H][] {
    return [...this.files];
  }

  /** A handle just opened (its room reserved by makeRoom), most recently used. */
  add(f: H): void {
    this.files.set(f.file, f);
  }

  /** `f` out of the map (the next caller opens a new handle), if it is still the one there. */
  remove(f: H): void {
    if (this.files.get(f.file) === f) this.files.delete(f.file);
  }

  /**
   * One more user of `f`, and `f` moved to the end of the map (most recently used). O(1), no
   * system call: the per-turn cost of the cap.
   */
  use(f: H): H {
    this.files.delete(f.file);
    this.files.set(f.file, f);
    f.users++;
    return f;
  }

  /**
   * One user less. True when that was the last user of a retired `f`: the caller closes it.
   * Else a caller waiting for room may take the handle's place.
   */
  done(f: H): boolean {
    if (--f.users > 0) return false;
    if (f.retired) return true;
    if (this.roomWaiters.length > 0) this.wakeRoomWaiters();
    return false;
  }

  /**
   * Reserve one handle: while at the cap, close the least recently used handle nobody is using
   * (never one with a write or an fsync under way), or wait until one is released or closed.
   */
  async makeRoom(): Promise<void> {
    while (this.opened >= this.maxOpen) {
      const idle = this.leastRecentIdle();
      if (idle !== undefined) await this.closer.close(idle).catch((err: Error) => this.closer.failed(idle, err));
      else await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    }
    this.opened++;
  }

  /** A reserved handle not opened after all, or one closed: room for a caller waiting. */
  unreserve(): void {
    this.opened--;
    if (this.roomWaiters.length > 0) this.wakeRoomWaiters();
  }

  /**
   * `op`, which opens a descriptor; if the process is out of them (EMFILE, ENFILE), once more
   * after closing every idle handle. Only then is it the storage fault it is classed as: this
   * writer's own handles are the likely cause, and closing them costs a reopen at most.
   */
  async withFds<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      if (!outOfFds(err)) throw err;
      const closed = await this.closeIdle();
      this.warnOutOfFds(err as Error, closed);
      return await op();
    }
  }

  /** The first handle in LRU order nobody is using (in use: at most one per turn running). */
  private leastRecentIdle(): string | undefined {
    for (const [file, f] of this.files) if (f.users === 0) return file;
    return undefined;
  }

  private wakeRoomWaiters(): void {
    // Every waiter looks again (a handle in use, closed or released may serve one of them).
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Close every handle nobody is using (fsynced first when dirty); returns how many. */
  private async closeIdle(): Promise<number> {
    const idle = [...this.files].filter(([, f]) => f.users === 0).map(([file]) => file);
    let closed = 0;
    await eachLimited(idle, CLOSE_PARALLEL, async (file) => {
      // Looked at again: past the first lanes, a turn may have taken the handle since the list.
      const f = this.files.get(file);
      if (f === undefined || f.users > 0) return;
      closed++;
      await this.closer.close(file).catch((err: Error) => this.closer.failed(file, err));
    });
    return closed;
  }

  private warnOutOfFds(err: Error, closed: number): void {
    const { log, suppressed } = this.fdWarns.take("fds", Date.now());
    if (!log) return;
    this.log?.warn(
      { err: err.message, closed, open: this.opened, cap: this.maxOpen, suppressed },
      "out of file descriptors: closed the idle transcript handles and tried again",
    );
  }
}
