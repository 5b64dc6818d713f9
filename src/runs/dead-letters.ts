/**
 * Dead letters: messages whose turn was given up (storage unavailable past its deadline, or
 * data no retry can run). They are never dropped: the run-finish script stores each one in the
 * same step that fails its run, `switchboard status` counts them, and an operator lists and
 * replays them (`switchboard deadletters`, RPC `deadletters.list` / `deadletters.replay`).
 * A replay queues the same message again as a new run on the same session (runId derived from
 * the original and the replay count, so a replay retried after a crash queues it once).
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { uuidFrom } from "./derived-id.js";
import type { Turn } from "./turn.js";

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
}

/** A listed dead letter: its message may be cut (see DeadLetters.list). */
export type DeadLetterPreview = DeadLetter & { textTruncated?: true; textChars?: number };

/** How much of each message a listing shows. */
export const LIST_TEXT_CHARS = 4000;
/** Letters read per HSCAN step: at most this many messages (each ≤ the message limit) in memory at once. */
const SCAN_CHUNK = 20;

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

export class DeadLetters {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  async count(): Promise<number> {
    return await this.redis.hlen(this.keys.deadLetters());
  }

  /**
   * Oldest first, each message cut to `textChars` characters (`textTruncated`, `textChars` say
   * so; `get` has the whole letter). Read in small chunks (HSCAN), so a hash of many large letters
   * (each up to the message limit) is never one reply nor one string: read whole, 530 letters of
   * 1 MiB passed V8's string limit and listing failed.
   */
  async list(textChars = LIST_TEXT_CHARS): Promise<DeadLetterPreview[]> {
    const out: DeadLetterPreview[] = [];
    let cursor = "0";
    do {
      const [next, flat] = await this.redis.hscan(this.keys.deadLetters(), cursor, "COUNT", SCAN_CHUNK);
      cursor = next;
      for (let i = 1; i < flat.length; i += 2) out.push(preview(JSON.parse(flat[i]!) as DeadLetter, textChars));
    } while (cursor !== "0");
    return out.sort((a, b) => a.failedAt - b.failedAt);
  }

  async get(runId: string): Promise<DeadLetter | null> {
    const raw = await this.redis.hget(this.keys.deadLetters(), runId);
    return raw ? (JSON.parse(raw) as DeadLetter) : null;
  }

  /** Drop a dead letter (replayed, or not wanted); false when there was none. */
  async discard(runId: string): Promise<boolean> {
    return (await this.redis.hdel(this.keys.deadLetters(), runId)) === 1;
  }
}

/** The runId a replay of `letter` runs under: stable per (original run, replay number). */
export function replayRunId(letter: DeadLetter): string {
  return uuidFrom(`replay:${letter.runId}:${letter.replays + 1}`);
}
