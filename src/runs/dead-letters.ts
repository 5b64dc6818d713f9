/**
 * Dead letters: messages whose turn was given up (storage unavailable past its deadline, or
 * data no retry can run). They are never dropped: the run-finish script stores each one in the
 * same step that fails its run, `switchboard status` counts them, and an operator lists and
 * replays them (`switchboard deadletters`, RPC `deadletters.list` / `deadletters.replay`).
 * A replay queues the same message again as a new run on the same session (runId derived from
 * the original and the replay count, so a replay retried after a crash queues it once); a letter
 * whose run had saved its outcome before it was given up (`result`) is finished with that outcome,
 * its runtime not run again (src/runs/replay.ts).
 *
 * Letters live in a hash (runId → JSON) and, written and removed in the same step, in an index
 * by failure time (zset runId → failedAt ms), which a listing pages through in order with a
 * cursor instead of reading the whole hash. Letters the index does not have yet (written before
 * it existed, or by a process that did not know it) are indexed by the first listing that finds
 * the hash larger than the index (docs/concepts/reliability.md, "Dead letters"). During a rolling
 * upgrade an older process may also remove a letter without its index entry, and the two counts
 * can then match while a letter is still unindexed: so a listing or `runIds` that finds a stale
 * entry reconciles the whole index (stale entries dropped, missing letters indexed).
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { luaCommand } from "../storage/lua-script.js";
import { ValidationError } from "../errors/index.js";
import { uuidFrom } from "./derived-id.js";
import type { SavedOutcome, Turn } from "./turn.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

export interface DeadLetter {
  runId: string;
  sessionKey: string;
  /** Why the turn was given up. */
  reason: string;
  /**
   * `storage`: storage stayed unavailable past the deadline; `permanent`: the turn cannot run; `corrupt`: unreadable
   * turn data.
   */
  kind: "storage" | "permanent" | "corrupt";
  failedAt: number;
  /** How many times this message was replayed before (0 for a first failure). */
  replays: number;
  /** The turn as queued (absent when its stored form could not be read: then `raw`). */
  turn?: Turn;
  raw?: string;
  /**
   * The outcome its run saved before it was given up (it ran, but its transcript could not be written): added by
   * run-finish.lua from the run record, so a replay writes it instead of running the runtime again.
   */
  result?: SavedOutcome;
}

/** A listed dead letter: its message may be cut (see DeadLetters.list). */
export type DeadLetterPreview = DeadLetter & { textTruncated?: true; textChars?: number };

/** One page of a listing, oldest first; `nextCursor` (absent on the last page) asks for the next. */
export interface DeadLetterPage {
  /** How many dead letters there are in all (not only on this page). */
  total: number;
  letters: DeadLetterPreview[];
  nextCursor?: string;
}

/** A position in the index: after the letter that failed at `failedAt` with this runId. */
interface IndexEntry {
  runId: string;
  failedAt: number;
}

/** How much of each message a listing shows. */
export const LIST_TEXT_CHARS = 4000;
/**
 * Letters read per step (HMGET, or HSCAN when indexing): at most this many messages (each ≤ the
 * message limit) in memory at once.
 */
const READ_CHUNK = 20;
/** Index entries read per step when only runIds are wanted (small). */
const ID_CHUNK = 1000;

/** What a reconcile found: how many letters there are, and the index entries it dropped and added. */
interface Reconciled {
  total: number;
  pruned: number;
  added: number;
}

function cut(text: string, max: number): { text: string; cut: boolean } {
  return text.length > max ? { text: `${text.slice(0, max)}…`, cut: true } : { text, cut: false };
}

/** `letter` with its message (turn text, or raw data) cut to `max` characters. */
function preview(letter: DeadLetter, max: number): DeadLetterPreview {
  const source = letter.turn?.text ?? letter.raw;
  if (source === undefined) return letter;
  const { text, cut: wasCut } = cut(source, max);
  if (!wasCut) return letter;
  const shown = letter.turn ? { ...letter, turn: { ...letter.turn, text } } : { ...letter, raw: text };
  return { ...shown, textTruncated: true, textChars: source.length };
}

/**
 * The cursor after `entry`: `<failedAt>:<runId>`, a position in the index's order (failure time,
 * then runId as Redis orders equal scores), so letters removed or added meanwhile shift nothing.
 */
function cursorOf(entry: IndexEntry): string {
  return `${entry.failedAt}:${entry.runId}`;
}

function parseCursor(cursor: string): IndexEntry {
  const m = /^(\d{1,16}):(.+)$/s.exec(cursor);
  if (!m) throw new ValidationError("cursor: not a cursor a dead-letter listing returned (nextCursor)");
  return { failedAt: Number(m[1]), runId: m[2]! };
}

/** Redis orders members of equal score by their bytes. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The failure time an unindexed letter is indexed under (0, first, when its JSON has none). */
function failedAtOf(raw: string): number {
  try {
    const at = (JSON.parse(raw) as { failedAt?: unknown }).failedAt;
    return typeof at === "number" && Number.isFinite(at) && at >= 0 ? Math.floor(at) : 0;
  } catch {
    return 0;
  }
}

export class DeadLetters {
  private readonly indexLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {
    this.indexLua = luaCommand(redis, LUA_DIR, "dead-letter-index");
  }

  async count(): Promise<number> {
    return await this.redis.hlen(this.keys.deadLetters());
  }

  /**
   * Oldest first (failure time, then runId), at most `limit` (all when absent), after `cursor`
   * (a `nextCursor` an earlier page returned). Each message is cut to `textChars` characters
   * (`textTruncated`, `textChars` say so; `get` has the whole letter). The index says which letters
   * come next, and they are read a few at a time (HMGET), so a hash of many large letters (each up
   * to the message limit) is never one reply nor one string: read whole, 530 letters of 1 MiB passed
   * V8's string limit and listing failed. An index entry whose letter is gone is dropped, and
   * the first one found makes the whole index reconciled: its letter may have been removed by an
   * older process while another older process wrote a letter without an entry, equal counts that
   * `reconcile` alone cannot tell apart. When that indexes letters, the page starts again from its
   * cursor, so a letter indexed before the place reached is listed (letters before the cursor are
   * not: a cursor is a position, as for a letter given up between pages).
   */
  async page(opts: { cursor?: string; limit?: number; textChars?: number } = {}): Promise<DeadLetterPage> {
    const limit = opts.limit ?? Number.POSITIVE_INFINITY;
    const textChars = opts.textChars ?? LIST_TEXT_CHARS;
    const start = opts.cursor === undefined ? null : parseCursor(opts.cursor);
    let after = start;
    let { total } = await this.reconcile(false);
    let reconciled = false;
    let letters: DeadLetterPreview[] = [];
    for (;;) {
      // One more than still wanted: whether another page follows is known without another read.
      const ids = await this.idsAfter(after, Math.min(READ_CHUNK, limit - letters.length + 1));
      if (ids.length === 0) return { total, letters };
      if (letters.length >= limit) return { total, letters, nextCursor: cursorOf(after!) };
      const take = ids.slice(0, limit - letters.length);
      const raws = await this.redis.hmget(this.keys.deadLetters(), ...take.map((e) => e.runId));
      const gone: string[] = [];
      take.forEach((e, i) => {
        const raw = raws[i];
        if (raw) letters.push(preview(JSON.parse(raw) as DeadLetter, textChars));
        else gone.push(e.runId);
      });
      after = take.at(-1)!;
      if (!gone.length) continue;
      await this.indexLua([this.keys.deadLetters(), this.keys.deadLetterIndex()], ["prune", ...gone]);
      // Once per page: a stale entry found again after it was removed by an older process meanwhile,
      // whose unindexed letters the next listing's counts show.
      if (reconciled) continue;
      reconciled = true;
      const r = await this.reconcile(true);
      total = r.total;
      if (r.added === 0) continue;
      after = start;
      letters = [];
    }
  }

  /** Every dead letter, oldest first, each message cut (see `page`). */
  async list(textChars = LIST_TEXT_CHARS): Promise<DeadLetterPreview[]> {
    return (await this.page({ textChars })).letters;
  }

  /**
   * Letters at positions `start`..`end` (inclusive, 0 = newest) of the newest-first order (the
   * reverse of `page`'s), each message cut as `page` cuts it: Bull Board's pages of the `ready`
   * queue's failed tab, by offset as the board asks. Only the index range and those letters are
   * read. Reconciled as `page` is: letters not yet indexed are indexed first, and an entry whose
   * letter is gone is dropped and makes the whole index reconciled once; that shifts the offsets,
   * so the range is read again.
   */
  async newestFirst(start: number, end: number, textChars = LIST_TEXT_CHARS): Promise<DeadLetterPreview[]> {
    await this.reconcile(false);
    for (let attempt = 0; ; attempt++) {
      const ids = await this.redis.zrevrange(this.keys.deadLetterIndex(), start, end);
      const letters: DeadLetterPreview[] = [];
      const gone: string[] = [];
      for (let i = 0; i < ids.length; i += READ_CHUNK) {
        const take = ids.slice(i, i + READ_CHUNK);
        const raws = await this.redis.hmget(this.keys.deadLetters(), ...take);
        take.forEach((runId, j) => {
          const raw = raws[j];
          if (raw) letters.push(preview(JSON.parse(raw) as DeadLetter, textChars));
          else gone.push(runId);
        });
      }
      // A letter gone again after the reconcile was removed meanwhile (a replay or discard racing
      // this read, or an older process): skipped rather than read again without end.
      if (!gone.length || attempt === 2) return letters;
      await this.indexLua([this.keys.deadLetters(), this.keys.deadLetterIndex()], ["prune", ...gone]);
      if (attempt === 0) await this.reconcile(true);
    }
  }

  /**
   * The runIds of every dead letter, oldest first (only the index is read, not the letters). The
   * whole index is reconciled first (a pass over ids, no letter read): with the counts equal, a
   * stale entry would stand for a letter that is gone and hide one that is not indexed.
   */
  async runIds(): Promise<string[]> {
    await this.reconcile(true);
    const out: string[] = [];
    let after: IndexEntry | null = null;
    for (;;) {
      const ids = await this.idsAfter(after, ID_CHUNK);
      out.push(...ids.map((e) => e.runId));
      if (ids.length < ID_CHUNK) return out;
      after = ids.at(-1)!;
    }
  }

  async get(runId: string): Promise<DeadLetter | null> {
    const raw = await this.redis.hget(this.keys.deadLetters(), runId);
    return raw ? (JSON.parse(raw) as DeadLetter) : null;
  }

  /** Drop a dead letter (replayed, or not wanted), with its index entry; false when there was none. */
  async discard(runId: string): Promise<boolean> {
    const res = await this.redis
      .multi()
      .hdel(this.keys.deadLetters(), runId)
      .zrem(this.keys.deadLetterIndex(), runId)
      .exec();
    const err = res?.find(([e]) => e)?.[0];
    if (err) throw err;
    return res?.[0]?.[1] === 1;
  }

  /**
   * Up to `n` index entries after `after` (from the start when null), in index order. Entries of
   * the same failure time as `after` are ordered by runId, so those up to it are skipped.
   */
  private async idsAfter(after: IndexEntry | null, n: number): Promise<IndexEntry[]> {
    const out: IndexEntry[] = [];
    let offset = 0;
    while (out.length < n) {
      const want = n - out.length;
      const flat = await this.redis.zrangebyscore(
        this.keys.deadLetterIndex(),
        after ? after.failedAt : "-inf",
        "+inf",
        "WITHSCORES",
        "LIMIT",
        offset,
        want,
      );
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const e = { runId: flat[i]!, failedAt: Number(flat[i + 1]) };
        if (after && e.failedAt === after.failedAt && byteOrder(e.runId, after.runId) <= 0) continue;
        out.push(e);
      }
      if (flat.length / 2 < want) break;
      offset += want;
    }
    return out;
  }

  /**
   * Bring the index in line with the letters, a chunk at a time (ZSCAN, HSCAN; each entry checked
   * in the same step as its change, see dead-letter-index.lua): drop entries whose letter is gone,
   * when the index holds more than the hash (or `full`), then index the letters it lacks, when the
   * hash holds more than the index. Without `full` and with equal counts nothing is read.
   */
  private async reconcile(full: boolean): Promise<Reconciled> {
    let [total, indexed] = await this.counts();
    const out = { total, pruned: 0, added: 0 };
    if (total === indexed && !full) return out;
    const keys = [this.keys.deadLetters(), this.keys.deadLetterIndex()];
    if (full || indexed > total) {
      let cursor = "0";
      do {
        const [next, flat] = await this.redis.zscan(this.keys.deadLetterIndex(), cursor, "COUNT", ID_CHUNK);
        cursor = next;
        const ids = flat.filter((_, i) => i % 2 === 0);
        if (ids.length) out.pruned += Number(await this.indexLua(keys, ["prune", ...ids]));
      } while (cursor !== "0");
      [total, indexed] = await this.counts();
      out.total = total;
    }
    if (total <= indexed) return out;
    let cursor = "0";
    do {
      const [next, flat] = await this.redis.hscan(this.keys.deadLetters(), cursor, "COUNT", READ_CHUNK);
      cursor = next;
      const pairs: (string | number)[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) pairs.push(flat[i]!, failedAtOf(flat[i + 1]!));
      if (pairs.length) out.added += Number(await this.indexLua(keys, ["add", ...pairs]));
    } while (cursor !== "0");
    return out;
  }

  /** How many letters the hash holds, and how many entries the index, read in one step. */
  private async counts(): Promise<[number, number]> {
    const res = await this.redis.multi().hlen(this.keys.deadLetters()).zcard(this.keys.deadLetterIndex()).exec();
    const err = res?.find(([e]) => e)?.[0];
    if (err) throw err;
    return [Number(res?.[0]?.[1] ?? 0), Number(res?.[1]?.[1] ?? 0)];
  }
}

/** The runId a replay of `letter` runs under: stable per (original run, replay number). */
export function replayRunId(letter: DeadLetter): string {
  return uuidFrom(`replay:${letter.runId}:${letter.replays + 1}`);
}
