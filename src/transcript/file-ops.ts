/**
 * The file operations every transcript writer shares: whole-line appends that are undone when
 * they fail part-way, closing off a torn tail, the header line, creating a file with its header,
 * directory fsync. Plain functions over files and handles; the callers (the locked store, the
 * lease holder's writer) decide who may write when.
 */
import { writeSync } from "node:fs";
import { mkdir, open, stat, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { TRANSCRIPT_VERSION, type TranscriptHeader } from "../history/transcript-types.js";

/** The transcript's first line. */
export function headerLine(sessionId: string, parentSession: string | undefined): string {
  const header: TranscriptHeader = {
    type: "session",
    version: TRANSCRIPT_VERSION,
    id: sessionId,
    timestamp: new Date().toISOString(),
    ...(parentSession ? { parentSession } : {}),
  };
  return `${JSON.stringify(header)}\n`;
}

/**
 * Append `buf` (whole lines), and fsync when `sync`, all or nothing: when the write or the
 * fsync fails (ENOSPC, EIO…) the file is truncated back to `size`, so no half line is left
 * behind, but only while nothing but this write lies past `size`. Another process may append
 * to the same file without the lease (`switchboard import`, a forked spawn); a truncate would
 * cut its lines. Then, and when even the truncate fails, this write's torn bytes are closed off
 * by the next append (closeTornTail) and skipped by readers.
 */
export async function appendOrUndo(fh: FileHandle, buf: Buffer, size: number, sync: boolean): Promise<void> {
  const progress = { written: 0 };
  try {
    writeAll(fh, buf, progress);
    if (sync) await fh.sync();
  } catch (err) {
    const now = await fh.stat().then(
      (st) => st.size,
      () => -1,
    );
    if (now === size + progress.written) await fh.truncate(size).catch(() => undefined);
    throw err;
  }
}

/** How far back closeTornTail looks for a newline per read. */
const TAIL_CHUNK = 64 * 1024;

/**
 * Every complete line ends with "\n"; a file that does not ends in a torn write: one that failed
 * part-way and could not be undone, a line another tool wrote without its newline, or a write
 * another process is making right now (a large write grows the file page by page, and another
 * process can see the size half way). The tail is closed off with a newline, never cut: a cut
 * would wait for that write to finish and then remove it, a turn its writer was told was
 * written. A fragment becomes a line of its own, which readers skip; a complete line (written
 * without its newline) is kept. With O_APPEND the newline lands after any write in progress.
 * A file with no complete line at all (torn inside its header) gets the header again. Returns
 * the new size.
 */
export async function closeTornTail(fh: FileHandle, size: number, sessionId: string): Promise<number> {
  if (size === 0 || (await lastByte(fh, size)) === 0x0a) return size;
  const torn = (await hasNewline(fh, size)) ? "\n" : `\n${headerLine(sessionId, undefined)}`;
  writeAll(fh, Buffer.from(torn, "utf8"), { written: 0 });
  return (await fh.stat()).size;
}

async function hasNewline(fh: FileHandle, size: number): Promise<boolean> {
  const chunk = Buffer.alloc(TAIL_CHUNK);
  for (let end = size; end > 0; ) {
    const start = Math.max(0, end - TAIL_CHUNK);
    const { bytesRead } = await fh.read(chunk, 0, end - start, start);
    if (chunk.subarray(0, bytesRead).includes(0x0a)) return true;
    end = start;
  }
  return false;
}

/**
 * A synchronous write on the open handle's descriptor: an append of a few lines lands in the
 * page cache in microseconds, while the promise API costs a thread-pool hop and its callback
 * (about 10x the CPU, measured per turn). fsync, which does wait on the disk, stays async.
 */
function writeAll(fh: FileHandle, buf: Buffer, progress: { written: number }): void {
  while (progress.written < buf.length)
    progress.written += writeSync(fh.fd, buf, progress.written, buf.length - progress.written);
}

async function lastByte(fh: FileHandle, size: number): Promise<number | undefined> {
  const b = Buffer.alloc(1);
  const { bytesRead } = await fh.read(b, 0, 1, size - 1);
  return bytesRead === 1 ? b[0] : undefined;
}

/**
 * Errors of opening or fsyncing a directory on a platform or file system that cannot do it
 * (Windows, some network file systems): a new name is as durable there as it can be made.
 */
const DIR_SYNC_UNSUPPORTED: ReadonlySet<string> = new Set([
  "EISDIR",
  "EINVAL",
  "EPERM",
  "EBADF",
  "ENOTSUP",
  "EOPNOTSUPP",
  "ENOSYS",
]);

/**
 * fsync the directory so a new name survives a crash. Returns whether it was done: false where
 * the file system cannot (DIR_SYNC_UNSUPPORTED). Every other error is thrown: out of file
 * descriptors (EMFILE), an I/O error or a directory gone means the name may not be durable, and
 * a caller under `fsync: "always"` must not call its write finished (it once was, silently).
 */
export async function syncDir(dir: string): Promise<boolean> {
  let d: FileHandle;
  try {
    d = await open(dir, "r");
  } catch (err) {
    if (DIR_SYNC_UNSUPPORTED.has((err as NodeJS.ErrnoException).code ?? "")) return false;
    throw err;
  }
  try {
    await d.sync();
    return true;
  } catch (err) {
    if (DIR_SYNC_UNSUPPORTED.has((err as NodeJS.ErrnoException).code ?? "")) return false;
    throw err;
  } finally {
    await d.close().catch(() => undefined);
  }
}

/** The process is out of file descriptors (its own limit, or the system's). */
export function outOfFds(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "EMFILE" || code === "ENFILE";
}

/**
 * Create `file` with its header line if it does not exist. Callers hold the transcript lock,
 * so the only race left is with a crash: an empty file (created, header never written) is
 * completed here. `wx` makes creation exclusive even if a lock was lost. Returns true if this
 * call wrote the header.
 */
export async function createWithHeader(
  file: string,
  sessionId: string,
  parentSession: string | undefined,
): Promise<boolean> {
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

export async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

export async function nonEmpty(file: string): Promise<boolean> {
  try {
    return (await stat(file)).size > 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
