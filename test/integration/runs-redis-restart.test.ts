/**
 * Redis goes away and comes back (a private redis-server with AOF, restarted on the same port
 * and dir): gateway readiness follows it, and the same gateway + workers, never restarted, go
 * on processing messages; a run in flight across the outage finishes and its waiter is told;
 * finished runs are still answered from Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { pace, quietPeriod, settle } from "../helpers/settle.js";
import { waitRunning } from "../helpers/api.js";
import {
  conversation,
  getRun,
  inbound,
  readTranscript,
  readyz,
  scriptConfig,
  timedWait,
} from "../fixtures/runs-support.js";

const SLOW_MS = 2500;

let redis: PrivateRedis;
/** Gateway + workers in one process (`switchboard start`). */
let sys: TestSystem;
/** A gateway-only process on the same deployment (`switchboard gateway`). */
let peer: TestSystem;
let redisDown = false;

beforeAll(async () => {
  redis = await startPrivateRedis({ appendonly: true });
  sys = await startTestSystem(
    scriptConfig(
      [
        { when: { regex: "slow" }, delayMs: SLOW_MS, reply: "done: {{text}}" },
        { delayMs: 5, reply: "re: {{text}}" },
      ],
      { redis: { url: redis.url } },
    ),
  );
  peer = await startPeer(sys.config, { gateway: true, workers: false });
});

async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return await Promise.race([p, sleep(ms).then(() => undefined)]);
}

afterAll(async () => {
  // Redis must be up for a clean close (BullMQ's close hangs on an unreachable Redis, bullmq#4656);
  // every step is time-boxed so a failed test cannot also hang the hook. Start it only if the test
  // left it stopped: a second start would lose track of the running server (and leak it).
  if (redisDown)
    await within(
      redis.start().catch(() => {}),
      10_000,
    );
  const closed = await within(Promise.allSettled([peer?.close(), sys?.close()]), 15_000);
  await redis?.cleanup();
  // Said, not skipped over: a system left running would go on under the next files of this
  // process (their in-process metrics, their Redis).
  if (!closed) throw new Error("the gateways and workers did not close within 15 s");
}, 40_000);

describe("runs on BullMQ: Redis restart", () => {
  it("readiness follows Redis; the same processes keep running turns after it returns", async () => {
    const first = await inbound(sys, "dave", "before");
    expect((await timedWait(sys, first.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: before" });
    expect(await readyz(sys.url)).toBe(200);
    expect(await readyz(peer.url)).toBe(200);

    // A slow run in flight on the workers, and a waiter on the other gateway, across the outage.
    const slow = await inbound(sys, "erin", "slow-across-outage");
    await waitRunning(sys, slow.runId, 10_000);
    // A client that gets "Redis is unavailable, try again" (503) tries again, as it is told.
    const slowWait = (async () => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          return await timedWait(peer, slow.runId, Math.max(1000, deadline - Date.now()));
        } catch (err) {
          if (!/503/.test((err as Error).message) || Date.now() > deadline) throw err;
          await pace(200, "back off before trying again, as a client told 503 would");
        }
      }
    })();

    redisDown = true;
    await redis.stop();
    const stoppedAt = Date.now();
    // While Redis is down the gateway answers 503, promptly (not by hanging the probe).
    await settle(async () => (await readyz(peer.url, 3000)) === 503, {
      what: "the gateway answering /readyz 503 with Redis down",
      timeoutMs: 10_000,
      stepMs: 100,
    });
    expect(Date.now() - stoppedAt).toBeLessThan(5000);
    await quietPeriod(1000, "the gateway does not claim readiness again while Redis is still down");
    expect(await readyz(peer.url, 3000)).toBe(503);
    // The all-in-one gateway must not claim readiness either (see the report: it does not answer
    // 503 but leaves the probe hanging, because its command connection retries forever).
    expect(await readyz(sys.url, 1500)).not.toBe(200);

    await redis.start();
    redisDown = false;
    await settle(async () => (await readyz(sys.url, 3000)) === 200 && (await readyz(peer.url, 3000)) === 200, {
      what: "both gateways ready again after Redis is back",
      timeoutMs: 15_000,
      stepMs: 100,
    });

    // The run that was in flight finished once and its waiter (subscribed before the outage) got it.
    const { result: slowResult } = await slowWait;
    expect(slowResult).toMatchObject({ status: "ok", reply: "done: slow-across-outage" });
    expect(await getRun(sys, slow.runId)).toMatchObject({ status: "ok", attempts: 1 });
    expect(conversation(readTranscript(sys.config, slow.sessionId))).toEqual([
      { role: "user", text: "slow-across-outage" },
      { role: "assistant", text: "done: slow-across-outage" },
    ]);

    // The finished run survived the restart (AOF) and is answered at once, by either gateway.
    for (const g of [sys, peer]) {
      const again = await timedWait(g, first.runId, 10_000);
      expect(again.result).toMatchObject({ status: "ok", reply: "re: before" });
      expect(again.ms).toBeLessThan(500);
    }

    // A new message is accepted and run by the same gateway and workers: one POST, no retry.
    const second = await inbound(sys, "dave", "after");
    expect(second.sessionKey).toBe(first.sessionKey);
    expect(second.sessionId).toBe(first.sessionId);
    expect((await timedWait(sys, second.runId, 20_000)).result).toMatchObject({ status: "ok", reply: "re: after" });
    expect(await getRun(sys, second.runId)).toMatchObject({ status: "ok", attempts: 1 });
    // And through the gateway-only process too.
    const third = await inbound(peer, "dave", "after-peer");
    expect((await timedWait(peer, third.runId, 20_000)).result).toMatchObject({
      status: "ok",
      reply: "re: after-peer",
    });
    expect(conversation(readTranscript(sys.config, first.sessionId))).toEqual([
      { role: "user", text: "before" },
      { role: "assistant", text: "re: before" },
      { role: "user", text: "after" },
      { role: "assistant", text: "re: after" },
      { role: "user", text: "after-peer" },
      { role: "assistant", text: "re: after-peer" },
    ]);
  }, 45_000);
});
