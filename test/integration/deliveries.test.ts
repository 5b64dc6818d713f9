/**
 * Outbound deliveries through a real webhook (a node:http server on 127.0.0.1:0): replies to
 * inbound messages, retries with backoff, final failure, no_route, sendPolicy blocking, and
 * GET /v1/deliveries with its filters. Real Redis, gateway + workers in this process.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { deliveries, finalDelivery, inbound, waitRunning } from "../helpers/api.js";
import { quietPeriod, settle } from "../helpers/settle.js";

interface Hit {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

const ATTEMPTS = 4;
let server: Server;
let base: string;
const hits: Hit[] = [];
const flakyCount = new Map<string, number>();
let sys: TestSystem;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const hit: Hit = { path: req.url ?? "", headers: req.headers, body: raw ? JSON.parse(raw) : {} };
      hits.push(hit);
      if (hit.path === "/down") {
        res.writeHead(503).end("down for maintenance");
        return;
      }
      if (hit.path === "/flaky") {
        const id = String(req.headers["idempotency-key"]);
        const n = (flakyCount.get(id) ?? 0) + 1;
        flakyCount.set(id, n);
        if (n <= 2) {
          res.writeHead(500).end("try again");
          return;
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    workers: { deliveryAttempts: ATTEMPTS, deliveryBackoffMs: 20 },
    session: { dmScope: "per-channel-peer" },
    channels: {
      tg: { kind: "webhook", url: `${base}/ok` },
      flaky: { kind: "webhook", url: `${base}/flaky` },
      down: { kind: "webhook", url: `${base}/down` },
      quiet: { kind: "log" },
    },
    agents: {
      defaults: {
        runtime: {
          kind: "script",
          rules: [
            { when: { regex: "^slow" }, delayMs: 1500, reply: "slow reply" },
            { when: { contains: "silence" }, reply: "NO_REPLY" },
            { reply: "echo: {{text}}" },
          ],
        },
      },
    },
  });
});

afterAll(async () => {
  await sys?.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("webhook channel", () => {
  it("a reply to an inbound message on `tg` is POSTed to the webhook and recorded as delivered", async () => {
    const res = await inbound(sys, { channel: "tg", chatType: "dm", from: "u1", text: "hi there" });
    expect(res.sessionKey).toBe("agent:main:tg:dm:u1");
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({
      status: "delivered",
      attempts: 1,
      channel: "tg",
      to: "u1",
      message: "echo: hi there",
      sessionKey: res.sessionKey,
    });
    expect(typeof d.id).toBe("string");
    expect(d.ts).toBeGreaterThan(Date.now() - 60_000);

    const posted = hits.filter((h) => h.body.sessionKey === res.sessionKey);
    expect(posted).toHaveLength(1);
    expect(posted[0]!.path).toBe("/ok");
    expect(posted[0]!.body).toMatchObject({
      message: "echo: hi there",
      to: "u1",
      sessionKey: res.sessionKey,
      channel: "tg",
      id: d.id,
    });
    expect(posted[0]!.headers["content-type"]).toContain("application/json");
    expect(posted[0]!.headers["idempotency-key"]).toBe(d.id);
  });

  it("a group reply goes to the group, with accountId and threadId", async () => {
    const res = await inbound(sys, {
      channel: "tg",
      accountId: "bot9",
      chatType: "group",
      from: "u2",
      groupId: "g77",
      threadId: 3,
      text: "in thread",
    });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "delivered", to: "g77", channel: "tg" });
    const posted = hits.find((h) => h.body.sessionKey === res.sessionKey)!;
    expect(posted.body).toMatchObject({ to: "g77", accountId: "bot9", threadId: "3", message: "echo: in thread" });
  });

  it("a silent reply (NO_REPLY) is not delivered", async () => {
    const res = await inbound(sys, { channel: "tg", chatType: "dm", from: "u-silent", text: "silence please" });
    await sys.rpc("agent.wait", { runId: res.runId, timeoutMs: 10_000 });
    // a later message in the same session is delivered: by then the silent one would be too
    const next = await inbound(sys, { channel: "tg", chatType: "dm", from: "u-silent", text: "speak" });
    await sys.rpc("agent.wait", { runId: next.runId, timeoutMs: 10_000 });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d.message).toBe("echo: speak");
    expect(await deliveries(sys, { sessionKey: res.sessionKey })).toHaveLength(1);
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey).map((h) => h.body.message)).toEqual([
      "echo: speak",
    ]);
  });

  it("a webhook failing twice then succeeding → delivered with attempts 3", async () => {
    const res = await inbound(sys, { channel: "flaky", chatType: "dm", from: "u3", text: "retry me" });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "delivered", attempts: 3, channel: "flaky", message: "echo: retry me" });
    expect(d.error).toBeUndefined();
    const posted = hits.filter((h) => h.body.sessionKey === res.sessionKey);
    expect(posted).toHaveLength(3);
    expect(new Set(posted.map((h) => h.headers["idempotency-key"]))).toEqual(new Set([d.id]));
  });

  it(`a webhook that always fails → failed after ${ATTEMPTS} attempts`, async () => {
    const res = await inbound(sys, { channel: "down", chatType: "dm", from: "u4", text: "doomed" });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "failed", attempts: ATTEMPTS, channel: "down" });
    expect(d.error).toContain("503");
    await quietPeriod(300, "no further attempt after the last one");
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey)).toHaveLength(ATTEMPTS);
    expect((await deliveries(sys, { sessionKey: res.sessionKey }))[0]!.attempts).toBe(ATTEMPTS);
  });

  it("a channel with no adapter → no_route (recorded, nothing sent)", async () => {
    const res = await inbound(sys, { channel: "nochan", chatType: "dm", from: "u5", text: "anyone?" });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "no_route", channel: "nochan", message: "echo: anyone?", to: "u5" });
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey)).toHaveLength(0);
  });

  it('no route at all → no_route on the channel `none` with `to: ""`; every record has a `to`', async () => {
    const key = `agent:main:noroute-${Date.now()}`;
    const run = await sys.rpc("agent", { sessionKey: key, message: "anyone?", deliver: true });
    expect((await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 })).status).toBe("ok");
    const d = await finalDelivery(sys, key);
    expect(d).toMatchObject({ status: "no_route", channel: "none", to: "", sessionKey: key });
    expect((await sys.rpc("deliveries.list", { sessionKey: key })).deliveries[0]).toMatchObject({ to: "" });
    for (const rec of await deliveries(sys, { limit: 1000 })) expect(typeof rec.to, JSON.stringify(rec)).toBe("string");
  });

  it("a `log` channel records the delivery as delivered without sending", async () => {
    const res = await inbound(sys, { channel: "quiet", chatType: "dm", from: "u6", text: "shh" });
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "delivered", attempts: 1, channel: "quiet" });
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey)).toHaveLength(0);
  });

  it("a reply whose session is denied by the time it is delivered is recorded as blocked, not sent", async () => {
    const res = await inbound(sys, { channel: "tg", chatType: "dm", from: "u7", text: "slow please" });
    await waitRunning(sys, res.runId, 5000);
    await sys.rpc("sessions.patch", { key: res.sessionKey, sendPolicy: "deny" });
    expect((await sys.rpc("agent.wait", { runId: res.runId, timeoutMs: 10_000 })).status).toBe("ok");
    const d = await finalDelivery(sys, res.sessionKey);
    expect(d).toMatchObject({ status: "blocked", message: "slow reply" });
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey)).toHaveLength(0);
  });
});

describe("send RPC and GET /v1/deliveries filters", () => {
  it("filters by sessionKey, channel and limit, newest first", async () => {
    const key = "agent:main:tg:dm:filter";
    const sent: string[] = [];
    for (const [channel, message] of [
      ["tg", "f1"],
      ["down", "f2"],
      ["tg", "f3"],
      ["nochan", "f4"],
    ] as const) {
      const r = await sys.rpc("send", { sessionKey: key, channel, to: "filter", message });
      expect(r.status).toBe("queued");
      sent.push(r.id);
      await settle(
        async () => (await deliveries(sys, { sessionKey: key })).find((d) => d.id === r.id && d.status !== "pending"),
        { what: "delivery of the send finished", timeoutMs: 10_000 },
      );
      const last = Math.max(...(await deliveries(sys, { sessionKey: key })).map((d) => d.ts));
      await settle(() => Date.now() > last, { what: "the clock past the last delivery's timestamp (distinct ms)" });
    }
    const bySession = await deliveries(sys, { sessionKey: key });
    expect(bySession.map((d) => d.message)).toEqual(["f4", "f3", "f2", "f1"]);
    expect(bySession.map((d) => d.status)).toEqual(["no_route", "delivered", "failed", "delivered"]);
    const ts = bySession.map((d) => d.ts);
    expect([...ts].sort((a, b) => b - a)).toEqual(ts);

    expect((await deliveries(sys, { sessionKey: key, limit: 2 })).map((d) => d.message)).toEqual(["f4", "f3"]);
    // The key as callers may write it (another case, without `agent:<id>:`) names the same session.
    for (const alias of ["AGENT:MAIN:TG:DM:FILTER", "tg:dm:filter"])
      expect(
        (await deliveries(sys, { sessionKey: alias })).map((d) => d.message),
        alias,
      ).toEqual(["f4", "f3", "f2", "f1"]);
    expect((await deliveries(sys, { sessionKey: key, channel: "tg" })).map((d) => d.message)).toEqual(["f3", "f1"]);

    const byChannel = await deliveries(sys, { channel: "down" });
    expect(byChannel.length).toBeGreaterThanOrEqual(2);
    expect(byChannel.every((d) => d.channel === "down")).toBe(true);
    expect(byChannel[0]!.message).toBe("f2");

    const all = await deliveries(sys, { limit: 3 });
    expect(all).toHaveLength(3);
    expect(all[0]!.message).toBe("f4");
    const allTs = (await deliveries(sys, { limit: 1000 })).map((d) => d.ts);
    expect([...allTs].sort((a, b) => b - a)).toEqual(allTs);

    const bad = await sys.get("/v1/deliveries?limit=0");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect((await sys.get("/v1/deliveries?limit=abc")).status).toBe(400);
  });

  it("send with the same idempotencyKey twice delivers once", async () => {
    const key = "agent:main:tg:dm:idem";
    const a = await sys.rpc("send", {
      sessionKey: key,
      channel: "tg",
      to: "idem",
      message: "just once",
      idempotencyKey: "send-1",
    });
    await settle(async () => (await deliveries(sys, { sessionKey: key })).find((d) => d.status === "delivered"), {
      what: "the send delivered",
      timeoutMs: 10_000,
    });
    const b = await sys.rpc("send", {
      sessionKey: key,
      channel: "tg",
      to: "idem",
      message: "just once",
      idempotencyKey: "send-1",
    });
    expect(b.id).toBe(a.id);
    await quietPeriod(200, "the repeated send delivers nothing more");
    expect(await deliveries(sys, { sessionKey: key })).toHaveLength(1);
    expect(hits.filter((h) => h.body.sessionKey === key)).toHaveLength(1);
    // The same key for another recipient is another send, not swallowed as a repeat.
    const other = await sys.rpc("send", {
      sessionKey: key,
      channel: "tg",
      to: "someone-else",
      message: "for someone else",
      idempotencyKey: "send-1",
    });
    expect(other.id).not.toBe(a.id);
    await settle(
      async () =>
        (await deliveries(sys, { sessionKey: key })).find((d) => d.id === other.id && d.status === "delivered"),
      {
        what: "the send to the other recipient delivered",
        timeoutMs: 10_000,
      },
    );
  });

  it("send on a session with sendPolicy deny is refused; allowed again after the override is cleared", async () => {
    const res = await inbound(sys, { channel: "tg", chatType: "dm", from: "u8", text: "hello" });
    await finalDelivery(sys, res.sessionKey);
    await sys.rpc("sessions.patch", { key: res.sessionKey, sendPolicy: "deny" });

    const refused = await sys.post("/v1/rpc/send", {
      sessionKey: res.sessionKey,
      channel: "tg",
      to: "u8",
      message: "psst",
    });
    expect(refused.body.ok).toBe(false);
    expect(refused.body.error.message).toBe("send blocked by session policy");
    await quietPeriod(100, "the refused send is never delivered");
    expect((await deliveries(sys, { sessionKey: res.sessionKey })).map((d) => d.message)).toEqual(["echo: hello"]);

    await sys.rpc("sessions.patch", { key: res.sessionKey, sendPolicy: null });
    const ok = await sys.rpc("send", { sessionKey: res.sessionKey, channel: "tg", to: "u8", message: "now ok" });
    await settle(
      async () =>
        (await deliveries(sys, { sessionKey: res.sessionKey })).find((d) => d.id === ok.id && d.status === "delivered"),
      { what: "the allowed send delivered", timeoutMs: 10_000 },
    );
    expect(hits.filter((h) => h.body.sessionKey === res.sessionKey).map((h) => h.body.message)).toEqual([
      "echo: hello",
      "now ok",
    ]);
  });

  it("send RPC validation: channel and message are required", async () => {
    const res = await sys.post("/v1/rpc/send", { to: "x" });
    expect(res.status).toBe(400);
    const paths = res.body.error.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(["channel", "message"]));
  });
});

describe("delivery indexes", () => {
  it("per session and per channel, hold nothing older than a record lives and expire with the last one", async () => {
    const { DeliveryLog } = await import("../../src/delivery/delivery-log.js");
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    const sessionKey = `agent:main:indexed-${Date.now()}`;
    const channel = `idxchan${Date.now()}`;
    const month = 30 * 86_400_000;
    const base = { sessionKey, kind: "send" as const, message: "m", channel };
    await log.open({ ...base, id: `old-${sessionKey}`, ts: Date.now() - month - 60_000 });
    await log.open({ ...base, id: `new-${sessionKey}`, ts: Date.now() });
    for (const index of [sys.svc.keys.deliveriesBySession(sessionKey), sys.svc.keys.deliveriesByChannel(channel)]) {
      expect(await sys.svc.redis.zrange(index, 0, -1)).toEqual([`new-${sessionKey}`]);
      const ttl = await sys.svc.redis.ttl(index);
      expect(ttl).toBeGreaterThan(month / 1000 - 60);
      expect(ttl).toBeLessThanOrEqual(month / 1000);
    }
  });
});

describe("delivery records after a crash", () => {
  it("a record half made by a dead worker (only its id written) is completed and indexed by the retry", async () => {
    const { DeliveryLog } = await import("../../src/delivery/delivery-log.js");
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    const id = `half-made-${Date.now()}`;
    // What the old two-step open left behind when killed between its steps.
    await sys.svc.redis.hset(sys.svc.keys.delivery(id), "id", id);
    await log.open({
      id,
      sessionKey: "agent:main:halfmade",
      kind: "reply",
      message: "hello again",
      channel: "tg",
      to: "42",
    });
    await log.attempt(id, "delivered");
    const listed = await log.list({ sessionKey: "agent:main:halfmade" });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id, kind: "reply", message: "hello again", status: "delivered", attempts: 1 });
    // Opening again (a second retry) changes nothing: status and attempts stay.
    await log.open({
      id,
      sessionKey: "agent:main:halfmade",
      kind: "reply",
      message: "hello again",
      channel: "tg",
      to: "42",
    });
    expect((await log.list({ sessionKey: "agent:main:halfmade" }))[0]).toMatchObject({
      status: "delivered",
      attempts: 1,
    });
  });
});

describe("sendPolicy is decided for the channel a message goes to", () => {
  async function policySystem(sendPolicy: Record<string, unknown>): Promise<TestSystem> {
    const s = await startTestSystem({
      maintenance: { sweepEveryMs: 3_600_000 },
      session: { dmScope: "per-channel-peer", sendPolicy },
      channels: { tg: { kind: "webhook", url: `${base}/ok` }, quiet: { kind: "log" } },
    });
    return s;
  }

  it("a rule denying a channel holds for sends there from any session, and for none", async () => {
    const s = await policySystem({ rules: [{ action: "deny", match: { channel: "quiet" } }] });
    try {
      const res = await inbound(s, { channel: "tg", chatType: "dm", from: "p1", text: "hello" });
      expect((await finalDelivery(s, res.sessionKey)).status).toBe("delivered");
      for (const params of [
        { channel: "quiet", to: "room", message: "no session" },
        { sessionKey: res.sessionKey, channel: "quiet", to: "room", message: "from a tg session" },
      ]) {
        const refused = await s.post("/v1/rpc/send", params);
        expect(refused.body).toMatchObject({ ok: false, error: { message: "send blocked by session policy" } });
      }
      // The same check on a reply routed there: recorded as blocked, never sent.
      const run = await s.rpc("agent", {
        sessionKey: res.sessionKey,
        message: "to quiet",
        deliver: true,
        channel: "quiet",
        to: "room",
      });
      await s.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 });
      // Recorded pending first, then decided by the delivery job (src/delivery/deliver.ts).
      const reply = await settle(
        async () =>
          (await deliveries(s, { sessionKey: res.sessionKey })).find(
            (d) => d.channel === "quiet" && d.status !== "pending",
          ),
        { what: "the reply routed to the denied channel decided" },
      );
      expect(reply.status).toBe("blocked");
    } finally {
      await s.close();
    }
  });

  it("a stranger's /send in a chat a chatType rule denies gets no answer there (dmScope main)", async () => {
    const s = await startTestSystem({
      maintenance: { sweepEveryMs: 3_600_000 },
      commands: { ownerAllowFrom: ["tg:owner"] },
      session: { sendPolicy: { rules: [{ action: "deny", match: { channel: "tg", chatType: "dm" } }] } },
      channels: { tg: { kind: "log" } },
    });
    try {
      const dm = { channel: "tg", chatType: "dm", from: "5551" };
      expect((await inbound(s, { ...dm, text: "hello" })).blocked).toBe("send_policy_deny");
      const refused = await s.post("/v1/inbound", { ...dm, text: "/send on" });
      expect(refused.body).toMatchObject({ command: "send", refused: "not_owner" });
      // A command reply from an allowed chat still goes out, and one into a denied chat type is
      // blocked at delivery even for a session whose entry does not say where it lives.
      const status = await s.post("/v1/inbound", {
        channel: "tg",
        chatType: "group",
        groupId: "g",
        from: "x",
        text: "/status",
      });
      expect(status.body.command).toBe("status");
      await settle(async () => (await deliveries(s, {})).some((d) => d.kind === "command" && d.to === "g"), {
        what: "the group's /status answer recorded",
      });
      const toStranger = (await deliveries(s, {})).filter((d) => d.to === "5551");
      expect(toStranger).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("an allow-listed channel is sent to under a default deny, also without a session", async () => {
    const s = await policySystem({ default: "deny", rules: [{ action: "allow", match: { channel: "tg" } }] });
    try {
      const sent = await s.rpc("send", { channel: "tg", to: "p2", message: "allowed" });
      await settle(async () => (await deliveries(s, {})).find((d) => d.id === sent.id && d.status === "delivered"), {
        what: "the allow-listed send delivered",
        timeoutMs: 10_000,
      });
      const refused = await s.post("/v1/rpc/send", { channel: "quiet", to: "p2", message: "not listed" });
      expect(refused.body).toMatchObject({ ok: false });
    } finally {
      await s.close();
    }
  });
});
