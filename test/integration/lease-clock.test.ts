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
    got.lease.released(); // its renewals stop (they would tick under later files of this process)
  }
});

it("a lease whose client was closed for good stops trying to renew it", async () => {
  const redis = new Redis(url);
  const ttlMs = 600; // renewed every 200 ms
  const leases = new SessionLeases(redis, new RedisKeys(`leaseclosed${process.pid}`), ttlMs);
  const got = await leases.tryAcquire("agent:main:closed");
  if (!got.acquired) throw new Error("the lease was not taken");
  // Never released (a holder cut short as its process shut down), its client closed.
  await redis.quit();
  const tries: string[] = [];
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (cmd, stream) => {
    tries.push(cmd.name);
    return send(cmd, stream);
  };
  await sleep(1500); // seven renewal periods
  // The first renewal after the close failed and was the last: no timer left ticking.
  expect(tries.length).toBeLessThanOrEqual(1);
  expect(redis.status).toBe("end");
});
