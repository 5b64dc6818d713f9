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
import { type Exposition, gatewayMetrics, since } from "../helpers/prometheus.js";
import { DeliveryLog } from "../../src/delivery/delivery-log.js";
import { laneIdOf } from "../../src/delivery/lane-id.js";

/** Enough that a message failing for good is retried for 6.2 s (0.2 s doubling): long for a loaded CI. */
const ATTEMPTS = 6;
const BACKOFF_MS = 200;
const ORPHAN_AFTER_MS = 500;

let server: Server;
let sys: TestSystem;
/** Messages the webhook took (answered 200), per recipient, in arrival order. */
const taken = new Map<string, string[]>();
/** Every POST in arrival order: its message and whether it was taken. */
const posts: { message: string; ok: boolean }[] = [];
/** Every POST, failed or not, per delivery id. */
const tries = new Map<string, number>();
/** This process's metrics when the system had started (the counters are process-wide). */
let metricsAtStart: Exposition;

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
      const ok = n > failuresWanted(body.message);
      posts.push({ message: body.message, ok });
      if (!ok) {
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
  metricsAtStart = await gatewayMetrics(sys);
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

/** The deliveries of a session once none is pending, by message (records of one ms have no order). */
async function settled(sessionKey: string, count: number, timeoutMs = 30_000): Promise<Map<string, Delivery>> {
  const all = await settle(
    async () => {
      const found = await deliveries(sys, { sessionKey, limit: 1000 });
      return found.length === count && found.every((d) => d.status !== "pending") ? found : undefined;
    },
    { what: `${count} settled deliveries for ${sessionKey}`, timeoutMs },
  );
  return new Map(all.map((d) => [d.message, d]));
}

/** Where in `posts` the `nth` (1-based; -1: last) POST of `message` is. */
function postIndex(message: string, nth: number): number {
  const at = posts.flatMap((p, i) => (p.message === message ? [i] : []));
  const i = nth < 0 ? at[at.length + nth] : at[nth - 1];
  expect(i, `POST ${nth} of ${message}`).toBeDefined();
  return i!;
}

describe("one chat, in order", () => {
  it("replies to inbound messages arrive in the order of their turns, though the first is retried twice", async () => {
    const from = "order-replies";
    let sessionKey = "";
    for (const text of ["one [fail:2]", "two", "three"])
      sessionKey = (await inbound(sys, { channel: "hook", chatType: "dm", from, text })).sessionKey;
    const recs = await settled(sessionKey, 3);
    expect([...recs.values()].map((d) => [d.message, d.status, d.attempts]).sort()).toEqual([
      ["echo: one [fail:2]", "delivered", 3],
      ["echo: three", "delivered", 1],
      ["echo: two", "delivered", 1],
    ]);
    // Without the lane, "two" and "three" were posted during the first one's backoff.
    expect(taken.get(from)).toEqual(["echo: one [fail:2]", "echo: two", "echo: three"]);
  });

  it("30 sends queued one after another arrive in that order over 16 slots, every third failing once", async () => {
    const to = "order-sends";
    const messages = Array.from({ length: 30 }, (_, i) => `s${i}${i % 3 === 0 ? " [fail:1]" : ""}`);
    for (const m of messages) await send(to, m);
    const recs = await settled(`agent:main:hook:dm:${to}`, 30, 90_000);
    expect([...recs.values()].every((d) => d.status === "delivered")).toBe(true);
    expect(taken.get(to)).toEqual(messages);
  });
});

describe("what a chat's first message holds, and what it does not", () => {
  it("another chat is not held while a chat's first message is retried; that chat goes on once it failed", async () => {
    const [held, other] = ["held-chat", "other-chat"];
    const h1 = await send(held, "h1 [fail:99]");
    const h2 = await send(held, "h2");
    await send(other, "o1");
    // Bull Board shows why h2's job waits: its log names the delivery it waits for.
    const why = await settle(
      async () => (await sys.svc.queues.delivery.getJobLogs(h2)).logs.find((l) => l.includes(h1)),
      { what: "h2's job log says what it waits for", timeoutMs: 10_000 },
    );
    expect(why).toMatch(/queued before it to the same chat/);
    const recs = await settled(`agent:main:hook:dm:${held}`, 2);
    expect(recs.get("h1 [fail:99]")).toMatchObject({ status: "failed", attempts: ATTEMPTS });
    expect(recs.get("h2")).toMatchObject({ status: "delivered", attempts: 1 });
    expect(taken.get(held)).toEqual(["h2"]);
    // h2 went only after h1's last try; o1, another chat, before it (h1 was tried for 6 s).
    expect(postIndex("h2", 1)).toBeGreaterThan(postIndex("h1 [fail:99]", ATTEMPTS));
    expect(postIndex("o1", 1)).toBeLessThan(postIndex("h1 [fail:99]", ATTEMPTS));
    expect((await settled(`agent:main:hook:dm:${other}`, 1)).get("o1")?.status).toBe("delivered");
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
        expect(job, "r1's job, still there to remove").toBeDefined();
        return await job!.remove().then(
          () => true,
          () => undefined,
        );
      },
      { what: "r1's job removed", timeoutMs: 5_000 },
    );
    expect(await sys.svc.queues.delivery.getJob(first)).toBeUndefined();
    const recs = await settled(`agent:main:hook:dm:${to}`, 2);
    expect(recs.get("r1 [fail:99]")).toMatchObject({ status: "failed" });
    expect(recs.get("r1 [fail:99]")!.error).toMatch(/removed/);
    expect(recs.get("r2")).toMatchObject({ status: "delivered" });
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
    expect(recs.get("never queued")).toMatchObject({ id: "ghost-1", status: "failed", attempts: 0 });
    expect(recs.get("after the ghost")).toMatchObject({ status: "delivered" });
    expect(taken.get(to)).toEqual(["after the ghost"]);
  });
});

describe("metrics", () => {
  it("switchboard_deliveries_total counts the waits and the first messages passed (the tests above)", async () => {
    const m = await gatewayMetrics(sys);
    // Every test above had messages wait; two passed a first message whose job was gone.
    expect(since(metricsAtStart, m, "switchboard_deliveries_total", { status: "waiting" })).toBeGreaterThanOrEqual(4);
    expect(since(metricsAtStart, m, "switchboard_deliveries_total", { status: "orphaned" })).toBe(2);
  });
});

describe("the lane steps themselves (DeliveryLog on Redis)", () => {
  const sessionKey = "agent:main:hook:dm:steps";
  const route = { channel: "hook", to: "steps" };
  const lane = (id: string) => ({ id: laneIdOf(route), owner: { queue: "delivery", jobId: id } });
  const rec = (id: string) => ({ id, sessionKey, kind: "send", message: id, ...route });

  it("a message settled behind the first one wakes nobody; the first one settled wakes the next", async () => {
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    for (const id of ["st-a", "st-b", "st-c"]) await log.open(rec(id), undefined, lane(id));
    // b is blocked while a waits out a retry delay: a must not be woken early.
    expect(await log.settle("st-b", "blocked", "send blocked by session policy", laneIdOf(route))).toBeNull();
    const next = await log.attempt("st-a", "delivered", undefined, laneIdOf(route));
    expect(next).toMatchObject({ id: "st-c", owner: { queue: "delivery", jobId: "st-c" } });
    expect(await log.attempt("st-c", "delivered", undefined, laneIdOf(route))).toBeNull();
    expect(await sys.svc.redis.exists(sys.svc.keys.deliveryLane(laneIdOf(route)))).toBe(0);
  });

  it("a delivery whose chat changed between attempts leaves the lane it was in", async () => {
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    const other = { channel: "hook", to: "steps-moved" };
    await log.open(rec("st-m"), undefined, lane("st-m"));
    // Its next attempt goes to another chat (an announce whose requester's route moved).
    const moved = { id: laneIdOf(other), owner: { queue: "delivery", jobId: "st-m" } };
    expect(await log.begin({ ...rec("st-m"), ...other }, moved, false)).toEqual({ status: "pending", behind: null });
    expect(await sys.svc.redis.zscore(sys.svc.keys.deliveryLane(laneIdOf(route)), "st-m")).toBeNull();
    expect(await sys.svc.redis.zscore(sys.svc.keys.deliveryLane(laneIdOf(other)), "st-m")).not.toBeNull();
    // Settled by a job that ends without posting it: out of the lane its record names, once.
    expect(await log.settleIfPending("st-m", "no_route", "ended without posting")).toEqual({
      settled: true,
      next: null,
    });
    expect(await log.settleIfPending("st-m", "failed", "again")).toEqual({ settled: false, next: null });
    expect(await log.get("st-m")).toMatchObject({ status: "no_route", error: "ended without posting" });
    expect(await sys.svc.redis.exists(sys.svc.keys.deliveryLane(laneIdOf(other)))).toBe(0);
  });

  it("a re-run after its recorded last failure does not post again; a retry on purpose does", async () => {
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    await log.open(rec("st-f"), undefined, lane("st-f"));
    await log.attempt("st-f", "failed", "webhook answered 503", laneIdOf(route));
    // The worker died before BullMQ moved the job to failed: its stalled re-run begins again.
    expect(await log.begin(rec("st-f"), lane("st-f"), false)).toEqual({
      status: "failed",
      error: "webhook answered 503",
    });
    expect(await sys.svc.redis.zscore(sys.svc.keys.deliveryLane(laneIdOf(route)), "st-f")).toBeNull();
    // An operator's retry in Bull Board (attempts used up): tried again, back in its lane.
    expect(await log.begin(rec("st-f"), lane("st-f"), true)).toEqual({ status: "pending", behind: null });
    expect(await log.get("st-f")).toMatchObject({ status: "pending" });
    await log.attempt("st-f", "delivered", undefined, laneIdOf(route));
  });
});
