/**
 * The file operations every transcript writer shares: whole-line appends that are undone when
 * they fail part-way, cutting a torn tail, the header line, creating a file with its header,
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
 * behind. If even the truncate fails, the torn tail is cut by the next append (cutTornTail)
 * and skipped by readers meanwhile.
 */
export async function appendOrUndo(fh: FileHandle, buf: Buffer, size: number, sync: boolean): Promise<void> {
  try {
    writeAll(fh, buf);
    if (sync) await fh.sync();
  } catch (err) {
    await fh.truncate(size).catch(() => undefined);
    throw err;
  }
}

/** How far back cutTornTail looks for the last newline per read. */
const TAIL_CHUNK = 64 * 1024;

/**
 * Every complete line ends with "\n"; a file that does not is torn (a write that failed
 * part-way). Cut it back to its last complete line and return the new size. Callers make sure
 * no acknowledged writer is mid-write. A file torn inside its header line gets the header again.
 */
export async function cutTornTail(fh: FileHandle, size: number, sessionId: string): Promise<number> {
  if (size === 0 || (await lastByte(fh, size)) === 0x0a) return size;
  let end = size;
  let keep = 0;
  const chunk = Buffer.alloc(TAIL_CHUNK);
  while (end > 0) {
    const start = Math.max(0, end - TAIL_CHUNK);
    const { bytesRead } = await fh.read(chunk, 0, end - start, start);
    const nl = chunk.subarray(0, bytesRead).lastIndexOf(0x0a);
    if (nl >= 0) {
      keep = start + nl + 1;
      break;
    }
    end = start;
  }
  await fh.truncate(keep);
  if (keep > 0) return keep;
  const header = Buffer.from(headerLine(sessionId, undefined), "utf8");
  await appendOrUndo(fh, header, 0, true);
  return header.length;
}

/**
 * A synchronous write on the open handle's descriptor: an append of a few lines lands in the
 * page cache in microseconds, while the promise API costs a thread-pool hop and its callback
 * (about 10x the CPU, measured per turn). fsync, which does wait on the disk, stays async.
 */
function writeAll(fh: FileHandle, buf: Buffer): void {
  let off = 0;
  while (off < buf.length) off += writeSync(fh.fd, buf, off, buf.length - off);
}

async function lastByte(fh: FileHandle, size: number): Promise<number | undefined> {
  const b = Buffer.alloc(1);
  const { bytesRead } = await fh.read(b, 0, 1, size - 1);
  return bytesRead === 1 ? b[0] : undefined;
}

/**
 * fsync the directory so a new name survives a crash; not every file system allows it.
 * Returns whether it was done.
 */
export async function syncDir(dir: string): Promise<boolean> {
  try {
    const d = await open(dir, "r");
    try {
      await d.sync();
      return true;
    } finally {
      await d.close();
    }
  } catch {
    // EISDIR/EINVAL/EPERM on some platforms and network file systems: nothing more to do.
    return false;
  }
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
