/**
 * Messages to one chat reach it in the order they were queued, whatever their retries
 * (docs/concepts/reliability.md, "Replies reach a chat in order"): a real webhook (node:http on
 * 127.0.0.1:0) that fails chosen messages a chosen number of times, real Redis, gateway + workers
 * with 16 delivery slots in this process. Other chats are not held; a first message that fails
 * for good, or whose job is gone, stops holding its chat.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { deliveries, inbound, type Delivery } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";
import { DeliveryLog } from "../../src/delivery/delivery-log.js";
import { laneIdOf } from "../../src/delivery/lane-id.js";

const ATTEMPTS = 4;
const BACKOFF_MS = 200;
const ORPHAN_AFTER_MS = 500;

let server: Server;
let sys: TestSystem;
/** Messages the webhook took (answered 200), per recipient, in arrival order. */
const taken = new Map<string, string[]>();
/** Every POST, failed or not, per delivery id. */
const tries = new Map<string, number>();

/** A message with `[fail:N]` in it is answered 503 its first N times. */
function failuresWanted(message: string): number {
  return Number(/\[fail:(\d+)\]/.exec(message)?.[1] ?? 0);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const body = JSON.parse(raw) as { id: string; to: string; message: string };
      const n = (tries.get(body.id) ?? 0) + 1;
      tries.set(body.id, n);
      if (n <= failuresWanted(body.message)) {
        res.writeHead(503).end("try later");
        return;
      }
      taken.set(body.to, [...(taken.get(body.to) ?? []), body.message]);
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    workers: {
      concurrency: 16,
      deliveryAttempts: ATTEMPTS,
      deliveryBackoffMs: BACKOFF_MS,
      deliveryOrphanAfterMs: ORPHAN_AFTER_MS,
    },
    channels: { hook: { kind: "webhook", url } },
    agents: { defaults: { runtime: { kind: "script", rules: [{ reply: "echo: {{text}}" }] } } },
  });
});

afterAll(async () => {
  await sys?.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function send(to: string, message: string): Promise<string> {
  const r = await sys.rpc("send", { sessionKey: `agent:main:hook:dm:${to}`, channel: "hook", to, message });
  expect(r.status).toBe("queued");
  return r.id as string;
}

/** The deliveries of a session once none is pending, oldest first. */
async function settled(sessionKey: string, count: number, timeoutMs = 20_000): Promise<Delivery[]> {
  return await settle(
    async () => {
      const all = (await deliveries(sys, { sessionKey, limit: 1000 })).reverse();
      return all.length === count && all.every((d) => d.status !== "pending") ? all : undefined;
    },
    { what: `${count} settled deliveries for ${sessionKey}`, timeoutMs },
  );
}

describe("one chat, in order", () => {
  it("replies to inbound messages arrive in the order of their turns, though the first is retried twice", async () => {
    const from = "order-replies";
    let sessionKey = "";
    for (const text of ["one [fail:2]", "two", "three"])
      sessionKey = (await inbound(sys, { channel: "hook", chatType: "dm", from, text })).sessionKey;
    const recs = await settled(sessionKey, 3);
    expect(recs.map((d) => [d.message, d.status, d.attempts])).toEqual([
      ["echo: one [fail:2]", "delivered", 3],
      ["echo: two", "delivered", 1],
      ["echo: three", "delivered", 1],
    ]);
    // Without the lane, "two" and "three" were posted during the first one's backoff.
    expect(taken.get(from)).toEqual(["echo: one [fail:2]", "echo: two", "echo: three"]);
  });

  it("30 sends queued one after another arrive in that order over 16 slots, every third failing once", async () => {
    const to = "order-sends";
    const messages = Array.from({ length: 30 }, (_, i) => `s${i}${i % 3 === 0 ? " [fail:1]" : ""}`);
    for (const m of messages) await send(to, m);
    const recs = await settled(`agent:main:hook:dm:${to}`, 30);
    expect(recs.every((d) => d.status === "delivered")).toBe(true);
    expect(taken.get(to)).toEqual(messages);
  });
});

describe("what a chat's first message holds, and what it does not", () => {
  it("another chat is not held while a chat's first message is retried; that chat goes on once it failed", async () => {
    const [held, other] = ["held-chat", "other-chat"];
    const t0 = Date.now();
    await send(held, "h1 [fail:99]");
    await send(held, "h2");
    await send(other, "o1");
    const o = await settled(`agent:main:hook:dm:${other}`, 1);
    expect(o[0]!.status).toBe("delivered");
    // o1 went while h1 was still between its retries (BACKOFF_MS doubling over ATTEMPTS attempts).
    const h1 = (await deliveries(sys, { sessionKey: `agent:main:hook:dm:${held}` })).find((d) =>
      d.message.startsWith("h1"),
    );
    expect(h1?.status, "h1 still being retried when o1 was delivered").toBe("pending");
    expect(taken.get(held)).toBeUndefined();

    const recs = await settled(`agent:main:hook:dm:${held}`, 2);
    expect(recs.map((d) => [d.message, d.status, d.attempts])).toEqual([
      ["h1 [fail:99]", "failed", ATTEMPTS],
      ["h2", "delivered", 1],
    ]);
    expect(taken.get(held)).toEqual(["h2"]);
    // h2 waited for all of h1's backoff (200 + 400 + 800 ms) before it was sent.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
  });

  it("a first message whose job was removed (an operator in Bull Board) stops holding its chat", async () => {
    const to = "removed-head";
    const first = await send(to, "r1 [fail:99]");
    await settle(() => (tries.get(first) ?? 0) >= 1, { what: "r1 tried once", timeoutMs: 10_000 });
    await send(to, "r2");
    // Removed between its retries (a job being sent is locked and refuses: try again).
    await settle(
      async () => {
        const job = await sys.svc.queues.delivery.getJob(first);
        if (!job) return true;
        return await job.remove().then(
          () => true,
          () => undefined,
        );
      },
      { what: "r1's job removed", timeoutMs: 10_000 },
    );
    const recs = await settled(`agent:main:hook:dm:${to}`, 2);
    expect(recs[0]).toMatchObject({ message: "r1 [fail:99]", status: "failed" });
    expect(recs[0]!.error).toMatch(/removed/);
    expect(recs[1]).toMatchObject({ message: "r2", status: "delivered" });
    expect(taken.get(to)).toEqual(["r2"]);
  });

  it("a message that joined its chat's lane but whose job was never added (a crash in between) is passed", async () => {
    const to = "ghost-head";
    const sessionKey = `agent:main:hook:dm:${to}`;
    // What a producer killed between the lane join and the job add leaves behind.
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    await log.open(
      { id: "ghost-1", sessionKey, kind: "send", message: "never queued", channel: "hook", to },
      undefined,
      { id: laneIdOf({ channel: "hook", to }), owner: { queue: "delivery", jobId: "ghost-1" } },
    );
    await send(to, "after the ghost");
    const recs = await settled(sessionKey, 2);
    expect(recs[0]).toMatchObject({ id: "ghost-1", status: "failed", attempts: 0 });
    expect(recs[1]).toMatchObject({ message: "after the ghost", status: "delivered" });
    expect(taken.get(to)).toEqual(["after the ghost"]);
  });
});
