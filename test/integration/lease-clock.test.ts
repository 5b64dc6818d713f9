/**
 * The transcript file cannot check the lease's fence, so a holder writes only while its lease is
 * surely still held (src/runs/session-lease.ts, heldUntil). That instant is on the monotonic
 * clock: on the wall clock, a clock stepped back (NTP, an operator) let a holder that had lost
 * Redis keep writing after the next holder began, and a turn's lines were doubled (reviewer,
 * with faketime).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { SessionLeases, surelyHeld } from "../../src/runs/session-lease.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { acquireTestRedis } from "../helpers/redis-server.js";

let url: string;
let release: () => Promise<void>;
beforeAll(async () => {
  ({ url, release } = await acquireTestRedis());
});
afterAll(async () => {
  await release();
});

it("a wall clock stepped back does not stretch how long a lease counts as surely held", async () => {
  const redis = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  const ttlMs = 600;
  const leases = new SessionLeases(redis, new RedisKeys(`leaseclock${process.pid}`), ttlMs);
  const got = await leases.tryAcquire("agent:main:clock");
  if (!got.acquired) throw new Error("the lease was not taken");
  expect(surelyHeld(got.lease)).toBe(true);
  // Redis out of reach from now on: no renewal confirms the lease again, as for a partitioned holder.
  redis.disconnect();
  vi.useFakeTimers({ toFake: ["Date"] });
  try {
    vi.setSystemTime(Date.now() - 120_000); // the wall clock stepped back two minutes
    await sleep(ttlMs + 100); // a real TTL later: Redis has let the lease go, another may hold it
    expect(surelyHeld(got.lease)).toBe(false);
  } finally {
    vi.useRealTimers();
  }
});
