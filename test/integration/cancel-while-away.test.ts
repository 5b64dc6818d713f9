/**
 * A cancel (`/stop`, a kill) is broadcast on pub/sub, which keeps nothing for a subscriber whose
 * connection is down at that moment. The cancel is also written on the run record, so a worker
 * whose cancel subscriber comes back checks the runs it holds and aborts a cancelled one: the
 * run is not left to run to its end. A TCP proxy in front of the test Redis loses the message.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { newRedis, testRedisUrl } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { scriptConfig } from "../fixtures/runs-support.js";
import { CancelBus } from "../../src/runs/cancel-bus.js";

let proxy: TcpProxy;
let sys: TestSystem;
let admin: Redis;

beforeAll(async () => {
  proxy = await startTcpProxy(testRedisUrl());
  sys = await startTestSystem(
    scriptConfig([{ when: { contains: "slow" }, delayMs: 20_000, reply: "late" }, { reply: "re: {{text}}" }], {
      redis: { url: proxy.url },
    }),
  );
  admin = newRedis();
});

afterAll(async () => {
  admin?.disconnect();
  await sys?.close();
  await proxy?.close();
});

describe("a cancel published while the worker's subscriber is away", () => {
  it("aborts the run once the subscriber is back (the run record says it was cancelled)", async () => {
    const run = await sys.rpc("agent", { sessionKey: "away", message: "slow job" });
    await settle(async () => (await sys.svc.runs.get(run.runId))?.status === "running", { what: "the run running" });
    const channel = sys.svc.keys.cancelChannel();
    // The subscriber's next connection: subscribed on the server, but nothing reaches it.
    const held = proxy.holdRepliesWhen((sent) => /subscribe/i.test(sent) && sent.includes(channel));
    proxy.dropAll();
    const drop = await held;
    const t0 = Date.now();
    await admin.hset(sys.svc.keys.run(run.runId), "cancelRequested", "killed");
    await new CancelBus(admin, sys.svc.keys).publish({
      sessionKey: "agent:main:away",
      runId: run.runId,
      reason: "killed",
    });
    drop(); // the message is lost with that connection; the subscriber connects and subscribes again
    await settle(async () => (await sys.svc.runs.get(run.runId))?.status === "killed", {
      what: "the run aborted",
      timeoutMs: 10_000,
    });
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 40_000);
});
