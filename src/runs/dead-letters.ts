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

export class DeadLetters {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  async count(): Promise<number> {
    return await this.redis.hlen(this.keys.deadLetters());
  }

  /** Oldest first. The hash is bounded by what operators leave in it; listing reads it whole. */
  async list(): Promise<DeadLetter[]> {
    const all = await this.redis.hvals(this.keys.deadLetters());
    return all.map((v) => JSON.parse(v) as DeadLetter).sort((a, b) => a.failedAt - b.failedAt);
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
