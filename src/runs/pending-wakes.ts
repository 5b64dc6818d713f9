/**
 * Pending wakes and the ready list (docs/design/runs.md, "Wake-ups"). A push that finds a session
 * idle records `<runId>|<sessionKey>` in the pending-wakes zset (score: when) and, for a
 * ready-list wake, appends it to the ready list, both inside the push script. The entry lives
 * until a drainer has the session; these are the steps outside the scripts: the overdue check's
 * reads and re-arms, and a ready drain's hand-offs.
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { Turn } from "./turn.js";
import { luaCommand } from "../storage/lua-script.js";
import { redisTimeMs } from "../storage/redis-time.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

export interface PendingWake {
  member: string;
  sessionKey: string;
}

/** A pending wake is `<runId>|<sessionKey>` (unique per push); scripts that begin turns get the suffix. */
export function pendingWakeSuffix(sessionKey: string): string {
  return `|${sessionKey}`;
}

/** `<runId>|<sessionKey>`: unique per push, so clearing one never clears a later one. */
export function pendingWakeMember(turn: Turn): string {
  return turn.runId + pendingWakeSuffix(turn.sessionKey);
}

/** The session a pending-wake member stands for (runIds hold no `|`). */
export function wakeSession(member: string): string {
  return member.slice(member.indexOf("|") + 1);
}

/** The runId of the push that recorded a pending-wake member. */
export function wakeRunId(member: string): string {
  return member.slice(0, member.indexOf("|"));
}

/**
 * Not a key: the CLIENT SETNAME of every ready-list consumer's connection, so `CLIENT LIST`
 * shows who consumes this deployment's ready list (as BullMQ names its workers' connections).
 */
export function readyConsumerName(keys: RedisKeys): string {
  return `switchboard:${keys.base}:ready`;
}

export class PendingWakes {
  private readonly rereadyLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {
    this.rereadyLua = luaCommand(redis, LUA_DIR, "wake-reready");
  }

  /**
   * Now on Redis's clock (ms): what wakes are scored with (push-turn.lua), so a process whose
   * clock is off neither hides a wake from the overdue check nor makes fresh ones look overdue.
   */
  async now(): Promise<number> {
    return await redisTimeMs(this.redis);
  }

  /** Wakes pending for longer than `olderThanMs` at `now` (Redis's clock), oldest first. */
  async overdue(olderThanMs: number, limit: number, now?: number): Promise<PendingWake[]> {
    const members = await this.redis.zrangebyscore(
      this.keys.pendingWakes(),
      "-inf",
      (now ?? (await this.now())) - olderThanMs,
      "LIMIT",
      0,
      limit,
    );
    return members.map((member) => ({ member, sessionKey: wakeSession(member) }));
  }

  /** The longest-pending wakes, oldest first (at most `limit`). */
  async oldest(limit: number): Promise<PendingWake[]> {
    const members = await this.redis.zrange(this.keys.pendingWakes(), 0, limit - 1);
    return members.map((member) => ({ member, sessionKey: wakeSession(member) }));
  }

  /** The ready list's members, or null when it holds more than `max` (not read then). */
  async readied(max: number): Promise<Set<string> | null> {
    const list = this.keys.readyList();
    if ((await this.redis.llen(list)) > max) return null;
    return new Set(await this.redis.lrange(list, 0, max - 1));
  }

  /** The wake is seen through: a drain ended, or a drain job has the session. */
  async clear(member: string): Promise<void> {
    await this.redis.zrem(this.keys.pendingWakes(), member);
  }

  /**
   * Clear a wake that a drain job has taken over (the overdue re-arm), from the ready list too, so
   * no worker pops it later for nothing. It is near the list's head when it is still there.
   */
  async retire(member: string): Promise<void> {
    await this.redis.multi().zrem(this.keys.pendingWakes(), member).lrem(this.keys.readyList(), 1, member).exec();
  }

  /** Mark a pending wake as seen at `now` (Redis's clock; its session's lease is held: a drainer is on it). */
  async touch(member: string, now?: number): Promise<void> {
    await this.redis.zadd(this.keys.pendingWakes(), "XX", now ?? (await this.now()), member);
  }

  /**
   * Put a session back at the end of the ready list with its wake (a drain that yielded with
   * turns left): other sessions go first, and the wake stays pending until a drain ends.
   */
  async reready(member: string): Promise<void> {
    await this.rereadyLua([this.keys.pendingWakes(), this.keys.readyList()], [member]);
  }
}
