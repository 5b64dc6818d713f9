/**
 * The per-session lease: at most one worker (on any host) runs turns of a session at a time.
 * Each acquisition gets a fresh fencing token; every write a holder makes (transcript append,
 * run record update, turn take/finish) checks the token in the same atomic step, so a holder
 * that stalled past its lease (GC pause, network blip) cannot write after a new holder took over.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../storage/redis-client.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisKeys } from "../storage/redis-keys.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

export interface LeaseHandle {
  sessionKey: string;
  token: number;
  /** The Redis key holding the token: the transcript store checks it before each append. */
  fenceKey: string;
  /** Aborted when a renewal finds the lease gone: the holder must stop writing. */
  lost: AbortSignal;
  /**
   * Until when (ms, on this process's monotonic clock: `performance.now()`) the lease is surely
   * still ours: the last successful acquire or renewal plus the TTL, minus a margin. Writes Redis
   * cannot fence (the transcript file) are made only before this instant. Monotonic, not the wall
   * clock: a clock stepped back (NTP, an operator) would stretch the instant and let a holder that
   * lost its lease write after the next holder began (lines doubled).
   */
  heldUntil(): number;
  release(): Promise<boolean>;
  /** The lease was given up by a script (turn-begin on an empty inbox): stop renewing it. */
  released(): void;
  /**
   * The pending wake this holding keeps until it gives the session back (a drain woken from the
   * ready list): the scripts that release the lease on an empty inbox clear it in the same step.
   */
  wake?: string;
}

export type AcquireResult = { acquired: true; lease: LeaseHandle } | { acquired: false; retryInMs: number };

export class SessionLeases {
  private readonly acquireLua;
  private readonly renewLua;
  private readonly releaseLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly ttlMs: number,
  ) {
    this.acquireLua = luaCommand(redis, LUA_DIR, "lease-acquire");
    this.renewLua = luaCommand(redis, LUA_DIR, "lease-renew");
    this.releaseLua = luaCommand(redis, LUA_DIR, "lease-release");
  }

  async tryAcquire(sessionKey: string): Promise<AcquireResult> {
    const leaseKey = this.keys.lease(sessionKey);
    const askedAt = performance.now();
    const [token, pttl] = (await this.acquireLua(
      [leaseKey, this.keys.fence(sessionKey), this.keys.leaseTake(sessionKey)],
      [this.ttlMs, randomUUID()],
    )) as [number, number];
    if (!token) return { acquired: false, retryInMs: this.retryIn(pttl) };
    return { acquired: true, lease: this.holding(sessionKey, token, askedAt) };
  }

  /** The lease TTL (ms), for scripts that take the lease themselves (lease-begin.lua). */
  get ttl(): number {
    return this.ttlMs;
  }

  /** How long to wait before asking again for a lease whose holder has `pttl` ms left. */
  retryIn(pttl: number): number {
    return pttl > 0 ? pttl : this.ttlMs;
  }

  /**
   * The handle of a lease taken with `token` by a script sent at `askedAt` (`performance.now()`: tryAcquire, or
   * lease-begin.lua, which takes it and begins a turn in one step): renewed until released.
   */
  holding(sessionKey: string, token: number, askedAt: number, wake?: string): LeaseHandle {
    const leaseKey = this.keys.lease(sessionKey);
    const lost = new AbortController();
    // Counted from before the round trip that confirmed it: never later than Redis's own expiry.
    const margin = Math.floor(this.ttlMs / 5);
    let confirmedAt = askedAt - margin;
    // Renew well before expiry; three chances per TTL ride out a slow Redis round trip.
    const timer = setInterval(
      () => {
        const sentAt = performance.now();
        this.renewLua([leaseKey], [token, this.ttlMs]).then(
          (ok) => {
            if (ok === 1) confirmedAt = sentAt - margin;
            if (ok !== 1) {
              clearInterval(timer);
              lost.abort(new Error(`lease on ${sessionKey} lost`));
            }
          },
          () => {
            // A failed renewal is not yet a lost lease: the next tick retries; if Redis stays
            // away past the TTL the token no longer matches and every fenced write refuses.
            // A client closed for good (the process shutting down) renews nothing again: a
            // timer left behind would tick for the rest of the process's life.
            if (this.redis.status === "end") clearInterval(timer);
          },
        );
      },
      Math.max(200, Math.floor(this.ttlMs / 3)),
    );
    timer.unref();

    let released = false;
    return {
      sessionKey,
      token,
      ...(wake ? { wake } : {}),
      fenceKey: leaseKey,
      lost: lost.signal,
      heldUntil: () => confirmedAt + this.ttlMs,
      release: async () => {
        if (released) return false;
        released = true;
        clearInterval(timer);
        return (await this.releaseLua([leaseKey], [token])) === 1;
      },
      released: () => {
        released = true;
        clearInterval(timer);
      },
    };
  }
}

/** The lease is surely still held now: not lost, and before its `heldUntil` (monotonic clock). */
export function surelyHeld(lease: Pick<LeaseHandle, "lost" | "heldUntil">): boolean {
  return !lease.lost.aborted && performance.now() < lease.heldUntil();
}
