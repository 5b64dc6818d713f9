/**
 * The run-done and cancel subscribers across a dropped connection (a TCP proxy in front of the
 * test Redis places the faults): they subscribe again on the new connection and hear what is
 * published after it, and a subscriber closed while that re-subscribe is still unanswered (a
 * process stopping just after Redis came back) ends quietly. ioredis's own re-subscription left
 * that SUBSCRIBE's promise unhandled: "Connection is closed", an unhandled rejection, which ends a
 * Node process.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { createRedis } from "../../src/queues/redis-connections.js";
import { CancelBus, type CancelMessage } from "../../src/runs/cancel-bus.js";
import { RunRecords } from "../../src/runs/run-records.js";
import { RunWaiter } from "../../src/runs/run-waiter.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import type { RedisClient } from "../../src/storage/redis-client.js";
import { newRedis, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";

let admin: Redis;
let proxy: TcpProxy;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
const opened: RedisClient[] = [];

beforeAll(async () => {
  admin = newRedis();
  proxy = await startTcpProxy(testRedisUrl());
  process.on("unhandledRejection", onUnhandled);
});

afterEach(() => {
  for (const c of opened.splice(0)) c.disconnect();
});

afterAll(async () => {
  process.off("unhandledRejection", onUnhandled);
  admin.disconnect();
  await proxy.close();
});

function subscriberThroughProxy(): RedisClient {
  const c = createRedis(proxy.url, "subscriber");
  opened.push(c);
  return c;
}

async function subscribers(channel: string): Promise<number> {
  const [, n] = (await admin.pubsub("NUMSUB", channel)) as [string, number];
  return Number(n);
}

describe("subscribers across a dropped connection", () => {
  it("the run-done subscriber subscribes again and a wait is answered by a finish published after", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const waiter = new RunWaiter(subscriberThroughProxy(), keys, new RunRecords(admin, keys));
    try {
      const channel = keys.runDoneChannel();
      await settle(async () => (await subscribers(channel)) === 1, { what: "the first SUBSCRIBE" });
      const before = proxy.accepted;
      proxy.dropAll();
      await settle(async () => proxy.accepted > before && (await subscribers(channel)) === 1, {
        what: "a SUBSCRIBE on the new connection",
      });
      // A queued run, then its finish published: the wait hears it (no read back needed).
      const runId = "00000000-0000-4000-8000-00000000beef";
      await admin.hset(keys.run(runId), { runId, sessionKey: "agent:main:x", status: "queued" });
      const pending = waiter.wait(runId, 5000);
      // Registered and read the queued record by then; the record stays queued, so only the
      // notification can answer the wait.
      await new Promise((r) => setTimeout(r, 200));
      await admin.publish(channel, `${runId}\n${JSON.stringify(["runId", runId, "status", "ok", "reply", "hi"])}`);
      const { record, timedOut } = await pending;
      expect(timedOut).toBe(false);
      expect(record).toMatchObject({ runId, status: "ok", reply: "hi" });
    } finally {
      waiter.close();
    }
  });

  it("the cancel subscriber subscribes again and hears a cancel published after", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const heard: CancelMessage[] = [];
    await CancelBus.listen(subscriberThroughProxy(), keys, (m) => heard.push(m));
    const before = proxy.accepted;
    proxy.dropAll();
    await settle(async () => proxy.accepted > before && (await subscribers(keys.cancelChannel())) === 1, {
      what: "a SUBSCRIBE on the new connection",
    });
    await new CancelBus(admin, keys).publish({ sessionKey: "agent:main:x", reason: "killed" });
    await settle(() => heard.length === 1, { what: "the cancel heard" });
    expect(heard[0]).toEqual({ sessionKey: "agent:main:x", reason: "killed" });
  });

  it("closing while the re-subscribe is unanswered rejects nothing unhandled", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const sub = subscriberThroughProxy();
    const waiter = new RunWaiter(sub, keys, new RunRecords(admin, keys));
    await CancelBus.listen(sub, keys, () => {});
    await settle(async () => (await subscribers(keys.runDoneChannel())) === 1, { what: "the first SUBSCRIBE" });
    // The next connection's SUBSCRIBE gets no answer: the process stops in that window.
    const held = proxy.holdRepliesWhen((sent) => /\r\nsubscribe\r\n/i.test(sent));
    proxy.dropAll();
    await held;
    waiter.close();
    sub.disconnect();
    await new Promise((r) => setTimeout(r, 300));
    expect(unhandled).toEqual([]);
  });
});
