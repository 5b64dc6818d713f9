/**
 * A ready-list pop whose answer is lost with its connection: Redis took the session's wake off the
 * ready list and answered, the answer never arrived, and the consumer's client, once reconnected,
 * sends the pop again (ioredis resends unanswered commands), which waits for another wake. The
 * popped wake is in nobody's hands. A TCP proxy in front of the test Redis holds back the answer
 * to one BLPOP and then drops that connection.
 *
 * The consumer checks for such wakes as soon as its connection is back (pending, not on the ready
 * list, no lease held) and hands them to drain jobs. Before, they waited for the overdue-wake
 * check: older than 10 s, on a timer of `workers.stalledIntervalMs` (30 s), so 10 s to 40 s.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptConfig, timedWait } from "../fixtures/runs-support.js";
import { newRedis, testRedisUrl } from "../helpers/context.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";

let proxy: TcpProxy;
let sys: TestSystem;
let admin: Redis;

beforeAll(async () => {
  proxy = await startTcpProxy(testRedisUrl());
  sys = await startTestSystem(scriptConfig([{ reply: "re: {{text}}" }], { redis: { url: proxy.url } }), {
    gateway: true,
    workers: {},
  });
  admin = newRedis();
});

afterAll(async () => {
  admin?.disconnect();
  await sys?.close();
  await proxy?.close();
});

describe("a ready-list pop whose answer was lost", () => {
  it("the popped session is drained as soon as the consumer is back, once, in order", async () => {
    const warm = await sys.rpc("agent", { sessionKey: "popped", message: "warm" });
    expect((await timedWait(sys, warm.runId, 10_000)).result).toMatchObject({ status: "ok" });

    const readyList = sys.svc.keys.readyList();
    const pendingWakes = sys.svc.keys.pendingWakes();
    /**
     * Push a turn while the consumer's BLPOP (it blocks a second per call) has its answer held, so
     * Redis hands it this session's wake. Returns the run, or null when that BLPOP ran out before
     * the push came (a slow machine): its answer was a timeout, and the wake is still on the list.
     */
    const pushIntoHeldPop = async (message: string) => {
      const drop = await proxy.holdRepliesWhen((sent) => /blpop/i.test(sent) && sent.includes(readyList));
      const t0 = Date.now();
      const run = await sys.rpc("agent", { sessionKey: "popped", message });
      const member = `${run.runId}|agent:main:popped`;
      // Popped (off the list) but still pending: the answer is on its way, held by the proxy.
      const popped = await settle(
        async () => (await admin.llen(readyList)) === 0 && (await admin.zscore(pendingWakes, member)) !== null,
        { timeoutMs: 2_000, what: "the wake popped by the held BLPOP" },
      ).then(
        () => true,
        () => false,
      );
      drop();
      return { run, member, t0, popped };
    };
    let attempt = await pushIntoHeldPop("next");
    for (let i = 0; !attempt.popped && i < 3; i++) {
      expect((await timedWait(sys, attempt.run.runId, 10_000)).result).toMatchObject({ status: "ok" });
      attempt = await pushIntoHeldPop("next");
    }
    expect(attempt.popped).toBe(true);
    const { run: next, member, t0 } = attempt;

    const { result } = await timedWait(sys, next.runId, 60_000);
    expect(result).toMatchObject({ status: "ok", reply: "re: next" });
    // Not the 10 s to 40 s of the overdue-wake check.
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(await sys.svc.runs.get(next.runId)).toMatchObject({ attempts: 1 });
    // The wake is seen through, and the session goes on as usual.
    await settle(async () => (await admin.zscore(pendingWakes, member)) === null, {
      timeoutMs: 5_000,
      what: "the pending wake cleared",
    });
    const third = await sys.rpc("agent", { sessionKey: "popped", message: "third" });
    expect((await timedWait(sys, third.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: third" });
  });
});
