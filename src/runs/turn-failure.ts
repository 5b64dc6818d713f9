/**
 * What to do with a turn that failed outside its runtime (the runtime's own errors become the
 * run's `error` outcome and never get here). Pure: the drain decides from this alone.
 *
 * - `stale`: another worker took the session over; stop, the new holder finishes the turn.
 * - `storage`: the transcript storage refused a write (permissions, full disk, I/O error, stale
 *   NFS handle). Nothing about the turn is wrong: it is parked and retried until the storage
 *   deadline (docs/concepts/reliability.md).
 * - `transient`: Redis away, a lock not had in time. Retried a few times by BullMQ.
 * - `permanent`: the turn itself cannot be run (invalid ids, data Redis refuses, a bug). A
 *   retry would fail the same way, so it ends as `error` at once and the session moves on.
 */
import { StaleFenceError, SwitchboardError } from "../errors/index.js";

export type TurnFailure =
  | { kind: "stale" }
  | { kind: "storage"; code: string; message: string }
  | { kind: "transient"; message: string }
  | { kind: "permanent"; message: string };

/** errno codes of a file system that is (for now) not accepting writes. */
export const STORAGE_FAULT_CODES: ReadonlySet<string> = new Set([
  "EACCES", // directory made unwritable, mount permissions changed
  "EPERM",
  "ENOSPC", // disk full
  "EDQUOT", // quota exceeded
  "EIO", // I/O error (failing disk, network file system hiccup)
  "ESTALE", // stale NFS file handle
  "EROFS", // remounted read-only after errors
  "ENOTCONN", // FUSE / network mount went away
  // Out of file descriptors: clears when load drops. The transcript writer has already closed
  // its idle handles and tried once more (holder-writer.ts), so it is not its own handles.
  "EMFILE",
  "ENFILE",
]);

/**
 * errno codes of a transcript path that is (for now) not what it should be: a directory of the
 * storage replaced by a file, removed mid-write, a symlink loop. Storage faults only when a file
 * system call on a path raised them (open, mkdir, rename, stat): the operator can put the path
 * right, and a turn given up meanwhile would be run again out of order by its replay.
 */
const PATH_FAULT_CODES: ReadonlySet<string> = new Set(["ENOTDIR", "EISDIR", "ELOOP", "ENOENT", "EEXIST"]);
const PATH_SYSCALLS: ReadonlySet<string> = new Set(["open", "mkdir", "rename", "stat", "lstat"]);

/** Codes of our own typed errors that no retry can fix (the turn's data is at fault). */
const PERMANENT_CODES: ReadonlySet<string> = new Set([
  "invalid_request",
  "invalid_session_key",
  "invalid_session_id",
  "invalid_agent_id",
  "invalid_config",
]);

export function classifyTurnFailure(err: unknown): TurnFailure {
  const message = errorMessage(err);
  if (err instanceof StaleFenceError) return { kind: "stale" };
  if (err instanceof SwitchboardError)
    return PERMANENT_CODES.has(err.code) ? { kind: "permanent", message } : { kind: "transient", message };
  const e = err as NodeJS.ErrnoException | undefined;
  // File system errors carry the syscall; a network error with the same code (EPERM from a
  // socket) is not storage.
  if (e && typeof e.code === "string" && typeof e.syscall === "string") {
    if (STORAGE_FAULT_CODES.has(e.code) || (PATH_FAULT_CODES.has(e.code) && PATH_SYSCALLS.has(e.syscall)))
      return { kind: "storage", code: e.code, message };
  }
  // Redis refused a command or a script failed on our data: the same call fails again.
  if (
    e?.name === "ReplyError" &&
    !/^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/.test(message)
  ) {
    return { kind: "permanent", message };
  }
  if (err instanceof SyntaxError || err instanceof TypeError || err instanceof RangeError)
    return { kind: "permanent", message };
  return { kind: "transient", message };
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Delay before a parked turn is tried again: doubling from 1 s up to `maxMs`, with ±20% jitter
 * so the sessions parked by one outage do not all retry in the same instant.
 */
export function storageRetryDelayMs(retries: number, maxMs: number, random = Math.random): number {
  const base = Math.min(maxMs, 1000 * 2 ** Math.min(retries, 20));
  return Math.round(base * (0.8 + 0.4 * random()));
}
