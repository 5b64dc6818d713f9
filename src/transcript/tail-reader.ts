/**
 * Readers for JSONL transcripts.
 *
 * Transcripts only grow, and the common question ("the last N messages") is about the end of
 * the file, so `readTail` reads BACKWARDS in fixed chunks from the end and stops as soon as it
 * has N entries: its cost is O(bytes of the last N lines), not O(file). A session with months
 * of history costs the same to page as a fresh one.
 *
 * Shared rules of every reader here:
 * - lines are split on the byte 0x0A on Buffers, never on decoded strings: a chunk boundary
 *   may cut a multi-byte UTF-8 character, but 0x0A never occurs inside one, so each complete
 *   line decodes cleanly;
 * - the header (`type:"session"`) is not an entry;
 * - unparseable lines are skipped (a torn write after a crash, or garbage from another tool);
 *   a truncated JSON object never parses, so a half-written line is never taken as an entry;
 * - an unterminated last line is accepted only when it parses as a whole object (a file
 *   written by another tool may lack the final newline; a line still being written does not
 *   parse yet);
 * - a line whose `id` was already seen is skipped (defence against a duplicated line).
 */
import { open, type FileHandle } from "node:fs/promises";
import type { TranscriptEntry, TranscriptHeader } from "../history/transcript-types.js";

export const DEFAULT_CHUNK_SIZE = 64 * 1024;
const NL = 0x0a;

export interface TailReadOptions {
  /** Bytes per backwards read (default 64 KiB). */
  chunkSize?: number;
  /** Only entries passing the filter are collected and counted towards `limit`. */
  filter?: (entry: TranscriptEntry) => boolean;
  /** Stop reading at the first entry (from the end) for which this is true; it is not collected. */
  stopAt?: (entry: TranscriptEntry) => boolean;
}

export interface TailReadResult {
  /** The last `limit` (filtered, unique) entries, oldest first. */
  entries: TranscriptEntry[];
  /** Bytes actually read from the file: the measure of the O(N) promise. */
  bytesRead: number;
  /** File size when the read started; bytes appended later are not looked at. */
  fileSize: number;
}

/** Parse one line into an entry, or undefined for blank, unparseable, header or id-less lines. */
export function parseEntryLine(line: Buffer | string): TranscriptEntry | undefined {
  const obj = parseObjectLine(line);
  if (!obj || obj.type === "session") return undefined;
  if (typeof obj.id !== "string" || typeof obj.type !== "string") return undefined;
  return obj as TranscriptEntry;
}

function parseObjectLine(line: Buffer | string): Record<string, unknown> | undefined {
  const text = typeof line === "string" ? line : line.toString("utf8");
  if (text.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/**
 * The last `limit` entries of a JSONL file, oldest first, reading backwards from the end.
 * A missing file reads as empty. Duplicates: reading backwards, the occurrence nearest the end
 * is kept (the window never has to look further back to decide).
 */
export async function readTail(file: string, limit: number, opts: TailReadOptions = {}): Promise<TailReadResult> {
  const fh = await openIfExists(file);
  if (!fh) return { entries: [], bytesRead: 0, fileSize: 0 };
  try {
    return await readTailFrom(fh, limit, opts);
  } finally {
    await fh.close();
  }
}

/** `readTail(...).entries`. */
export async function readLastEntries(
  file: string,
  limit: number,
  opts: TailReadOptions = {},
): Promise<TranscriptEntry[]> {
  return (await readTail(file, limit, opts)).entries;
}

async function readTailFrom(fh: FileHandle, limit: number, opts: TailReadOptions): Promise<TailReadResult> {
  const chunkSize = Math.max(1, Math.floor(opts.chunkSize ?? DEFAULT_CHUNK_SIZE));
  const fileSize = (await fh.stat()).size;
  const newestFirst: TranscriptEntry[] = [];
  const seen = new Set<string>();
  let bytesRead = 0;
  if (!(limit > 0) || fileSize === 0) return { entries: [], bytesRead, fileSize };

  const take = (line: Buffer): boolean => {
    const entry = parseEntryLine(line);
    if (!entry || seen.has(entry.id)) return false;
    if (opts.stopAt?.(entry)) return true;
    seen.add(entry.id);
    if (opts.filter && !opts.filter(entry)) return false;
    newestFirst.push(entry);
    return newestFirst.length >= limit;
  };

  // `parts` = the bytes (in file order) of the line we are in the middle of: its end is known,
  // its start lies further back. Kept as a list so a very long line costs O(length), not
  // O(length^2) in re-concatenation.
  let parts: Buffer[] = [];
  let pos = fileSize;
  while (pos > 0) {
    const len = Math.min(chunkSize, pos);
    pos -= len;
    const chunk = Buffer.allocUnsafe(len);
    const got = await readFully(fh, chunk, pos);
    bytesRead += got;
    const c = chunk.subarray(0, got);
    // Walk this chunk's newlines from the end: each one closes off the line after it. The
    // segment after the file's last newline is the unterminated last line (usually empty).
    let end = c.length;
    let nl = end > 0 ? c.lastIndexOf(NL, end - 1) : -1;
    while (nl !== -1) {
      const seg = c.subarray(nl + 1, end);
      const line = parts.length ? Buffer.concat([seg, ...parts]) : seg;
      parts = [];
      if (take(line)) return done();
      end = nl;
      nl = end > 0 ? c.lastIndexOf(NL, end - 1) : -1;
    }
    if (end > 0) parts.unshift(c.subarray(0, end));
  }
  // The file's first line (normally the header) has no newline before it.
  if (parts.length) take(Buffer.concat(parts));
  return done();

  function done(): TailReadResult {
    return { entries: newestFirst.reverse(), bytesRead, fileSize };
  }
}

/** One line found by a forward scan, with its byte range in the file. */
export interface ScannedLine {
  /** Parsed entry, or undefined (header, blank, unparseable, id-less). */
  entry: TranscriptEntry | undefined;
  start: number;
  /** Offset after the line's newline (or after the unterminated last line). */
  end: number;
  /** False for an unterminated last line. */
  terminated: boolean;
}

/**
 * Forward scan of `fh` from `start` to `end` (exclusive) in chunks, line by line, without
 * loading the file. Used by the readers below and by the store's index reconciliation (which
 * scans only the unindexed tail of the file).
 */
export async function* scanLines(
  fh: FileHandle,
  start = 0,
  end?: number,
  chunkSize = DEFAULT_CHUNK_SIZE,
): AsyncGenerator<ScannedLine> {
  const stop = end ?? (await fh.stat()).size;
  // `parts` = bytes of a line whose newline has not been reached yet (list: no O(n^2) concat).
  let parts: Buffer[] = [];
  let partsStart = start;
  let pos = start;
  while (pos < stop) {
    const len = Math.min(chunkSize, stop - pos);
    const chunk = Buffer.allocUnsafe(len);
    const got = await readFully(fh, chunk, pos);
    if (got === 0) break; // file shrank under us: nothing more to read
    const c = chunk.subarray(0, got);
    const cStart = pos;
    pos += got;
    let ls = 0;
    let nl = c.indexOf(NL, ls);
    while (nl !== -1) {
      const seg = c.subarray(ls, nl);
      const line = parts.length ? Buffer.concat([...parts, seg]) : seg;
      const lineStart = parts.length ? partsStart : cStart + ls;
      parts = [];
      yield { entry: parseEntryLine(line), start: lineStart, end: cStart + nl + 1, terminated: true };
      ls = nl + 1;
      nl = c.indexOf(NL, ls);
    }
    if (ls < c.length) {
      if (!parts.length) partsStart = cStart + ls;
      parts.push(c.subarray(ls));
    }
  }
  if (parts.length) {
    const line = Buffer.concat(parts);
    yield { entry: parseEntryLine(line), start: partsStart, end: partsStart + line.length, terminated: false };
  }
}

/** Stream every entry (oldest first, first occurrence of an id wins). Missing file → []. */
export async function* iterateEntries(
  file: string,
  opts: { chunkSize?: number } = {},
): AsyncGenerator<TranscriptEntry> {
  const fh = await openIfExists(file);
  if (!fh) return;
  try {
    const seen = new Set<string>();
    for await (const { entry } of scanLines(fh, 0, undefined, opts.chunkSize)) {
      if (!entry || seen.has(entry.id)) continue;
      seen.add(entry.id);
      yield entry;
    }
  } finally {
    await fh.close();
  }
}

/** All entries of a transcript, for small tools and tests (streams; memory = the result). */
export async function readAllEntries(file: string): Promise<TranscriptEntry[]> {
  const out: TranscriptEntry[] = [];
  for await (const entry of iterateEntries(file)) out.push(entry);
  return out;
}

/** The header (first line) if it is one; undefined for a missing, empty or header-less file. */
export async function readHeader(file: string): Promise<TranscriptHeader | undefined> {
  const fh = await openIfExists(file);
  if (!fh) return undefined;
  try {
    for await (const line of scanRawFirstLine(fh)) {
      const obj = parseObjectLine(line);
      return obj && obj.type === "session" ? (obj as TranscriptHeader) : undefined;
    }
    return undefined;
  } finally {
    await fh.close();
  }
}

/** Yields the bytes of the first line only (reads just far enough to find its newline). */
async function* scanRawFirstLine(fh: FileHandle): AsyncGenerator<Buffer> {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(4096);
    const got = await readFully(fh, chunk, pos);
    if (got === 0) break;
    pos += got;
    const nl = chunk.subarray(0, got).indexOf(NL);
    if (nl !== -1) {
      parts.push(chunk.subarray(0, nl));
      yield Buffer.concat(parts);
      return;
    }
    parts.push(chunk.subarray(0, got));
  }
  if (parts.length) yield Buffer.concat(parts);
}

/** Fill `buf` from `position` unless EOF comes first; returns bytes read. */
async function readFully(fh: FileHandle, buf: Buffer, position: number): Promise<number> {
  let off = 0;
  while (off < buf.length) {
    const { bytesRead } = await fh.read(buf, off, buf.length - off, position + off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return off;
}

async function openIfExists(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
