/**
 * The lock that serialises the writers of one transcript that do not hold the session's lease
 * (transcript-store.ts): a Redis lock, because O_APPEND and `open(..., "wx")` lock files are not
 * reliable across NFS clients, and a crashed host leaves a lock file nobody can prove stale.
 *
 * - The lock is a token `SET ... NX PX` inside a Lua script (txlock-acquire.lua), released by
 *   compare-and-delete (txlock-release.lua), so a crashed holder blocks the file at most one TTL.
 * - It is FIFO-fair: waiters queue in a sorted set (heartbeats in another, a silent waiter is
 *   dropped), because a bare `SET NX` retry loop lets a busy process starve the others.
 * - An in-process promise chain comes first, so one process does not fight itself over Redis.
 * - `guard` re-checks, right before a write, that the lock is still ours and (optionally) that a
 *   session-lease fencing token is still current (stale lease holders cannot write).
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { StaleFenceError, TranscriptLockError } from "../errors/index.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisClient } from "../storage/redis-client.js";

/** The lock's keys for one transcript (RedisKeys.transcriptLock…). */
export interface LockKeys {
  lock: string;
  /** Waiters for the lock, oldest first (zset token -> arrival ms). */
  queue: string;
  /** Waiters' last poll (zset token -> ms): a silent waiter is dropped from the queue. */
  heartbeats: string;
}

/** Session-lease fence: `GET key` must equal `token` at write time, else StaleFenceError. */
export interface Fence {
  key: string;
  token: number;
}

/** A lock waiter silent for this long is dropped from the queue (waiters poll every <= 25 ms). */
const WAITER_STALE_MS = 2000;

type GuardReply = [number, string];

/** This folder's Lua scripts (./lua/*.lua), registered through the shared loader. */
export const TRANSCRIPT_LUA_DIR = new URL("./lua/", import.meta.url);

export class TranscriptLock {
  private readonly lua: {
    acquire: ReturnType<typeof luaCommand>;
    leave: ReturnType<typeof luaCommand>;
    release: ReturnType<typeof luaCommand>;
    guard: ReturnType<typeof luaCommand>;
  };
  /** Per-lock-key promise chains: holders of one process for one file run one at a time. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(
    redis: RedisClient,
    /** Lock TTL: a crashed holder blocks the transcript at most this long. */
    readonly ttlMs: number,
    /** How long `run` waits for the lock before TranscriptLockError. */
    private readonly waitMs: number,
  ) {
    this.lua = {
      acquire: luaCommand(redis, TRANSCRIPT_LUA_DIR, "txlock-acquire"),
      leave: luaCommand(redis, TRANSCRIPT_LUA_DIR, "txlock-leave"),
      release: luaCommand(redis, TRANSCRIPT_LUA_DIR, "txlock-release"),
      guard: luaCommand(redis, TRANSCRIPT_LUA_DIR, "txguard"),
    };
  }

  /** In-process chain, then the Redis lock, then `fn(token)`; always releases. */
  async run<T>(keys: LockKeys, file: string, fn: (token: string) => Promise<T>): Promise<T> {
    return await this.serial(keys.lock, async () => {
      const token = randomBytes(16).toString("hex");
      await this.acquire(keys, token, file);
      try {
        return await fn(token);
      } finally {
        // Best effort: if Redis is unreachable the lock expires after its TTL anyway.
        await this.lua.release([keys.lock], [token]).catch(() => 0);
      }
    });
  }

  /**
   * Right before a write: the lock is still held by `token` (its TTL is renewed) and, with a
   * fence, the session lease's token is still `fence.token`. Throws TranscriptLockError when
   * the lock expired, StaleFenceError for a stale fence.
   */
  async guard(
    lockKey: string,
    token: string,
    file: string,
    sessionId: string,
    fence: Fence | undefined,
  ): Promise<void> {
    const [code, current] = fence
      ? ((await this.lua.guard([lockKey, fence.key], [token, this.ttlMs, fence.token])) as GuardReply)
      : ((await this.lua.guard([lockKey], [token, this.ttlMs])) as GuardReply);
    if (code === 1) return;
    if (code === 0) throw new TranscriptLockError(file, this.ttlMs); // lock expired before the write
    const cur = current === "" || !Number.isFinite(Number(current)) ? null : Number(current);
    throw new StaleFenceError(sessionId, fence?.token ?? NaN, cur);
  }

  private async serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(key) ?? Promise.resolve();
    const run = prev.then(() => fn());
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.chains.set(key, settled);
    void settled.then(() => {
      if (this.chains.get(key) === settled) this.chains.delete(key);
    });
    return await run;
  }

  /**
   * Take the FIFO lock (txlock-acquire.lua), polling until `waitMs`. The head of the queue
   * polls every ~2 ms so a released lock is handed over quickly; the others poll more slowly
   * (their polls are also their heartbeats). Jitter keeps pollers from moving in lockstep.
   */
  private async acquire(keys: LockKeys, token: string, file: string): Promise<void> {
    const started = Date.now();
    for (;;) {
      const place = (await this.lua.acquire(
        [keys.lock, keys.queue, keys.heartbeats],
        [token, this.ttlMs, WAITER_STALE_MS],
      )) as number;
      if (place < 0) return;
      const waited = Date.now() - started;
      if (waited >= this.waitMs) {
        await this.lua.leave([keys.queue, keys.heartbeats], [token]).catch(() => 0);
        throw new TranscriptLockError(file, waited);
      }
      const base = Math.min(2 + place * 4, 20);
      await sleep(Math.max(1, Math.min(base * (0.75 + Math.random() / 2), this.waitMs - waited)));
    }
  }
}
