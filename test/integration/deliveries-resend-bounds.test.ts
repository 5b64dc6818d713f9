/**
 * A resent `send` (same idempotencyKey) after its delivery failed for good, or while it is still
 * queued or in flight; GET /v1/deliveries within chat.history's byte bounds; and the
 * `channel:<ch>` key of a send with no session as a filter. Real Redis and a real webhook.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { deliveries } from "../helpers/api.js";
import { quietPeriod, settle } from "../helpers/settle.js";
import { DELIVERY_OMITTED_TEXT, DeliveryLog } from "../../src/delivery/delivery-log.js";
import { CHAT_HISTORY_MAX_BYTES, HISTORY_MESSAGE_MAX_BYTES } from "../../src/history/sanitize-history.js";

const ATTEMPTS = 2;
let server: Server;
let base: string;
let failing = true;
/** Requests to /hang wait for this to be called. */
let releaseHang: (() => void) | undefined;
const posted: { path: string; message: string }[] = [];
let sys: TestSystem;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const body = raw ? JSON.parse(raw) : {};
      posted.push({ path: req.url ?? "", message: String(body.message) });
      if (req.url === "/hang") {
        releaseHang = () => {
          if (!res.headersSent) res.writeHead(200).end("{}");
        };
        return;
      }
      if (req.url === "/flaky" && failing) {
        res.writeHead(500).end("broken");
        return;
      }
      res.writeHead(200).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    workers: { deliveryAttempts: ATTEMPTS, deliveryBackoffMs: 20 },
    channels: {
      flaky: { kind: "webhook", url: `${base}/flaky` },
      slow: { kind: "webhook", url: `${base}/hang`, timeoutMs: 30_000 },
      ok: { kind: "webhook", url: `${base}/ok` },
    },
  });
});

afterAll(async () => {
  releaseHang?.();
  await sys?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function record(id: string) {
  return (await deliveries(sys, { limit: 1000 })).find((d) => d.id === id);
}

describe("a resent send", () => {
  it("whose delivery failed for good is retried once the webhook recovers, and says so", async () => {
    const params = { sessionKey: "agent:main:resend", channel: "flaky", to: "u", message: "m1", idempotencyKey: "k1" };
    const first = await sys.rpc("send", params);
    expect(first).toEqual({ id: first.id, status: "queued" });
    await settle(async () => (await record(first.id))?.status === "failed", { what: "the send failed for good" });
    expect(posted.filter((p) => p.message === "m1")).toHaveLength(ATTEMPTS);

    failing = false;
    const again = await sys.rpc("send", params);
    expect(again).toMatchObject({ id: first.id, status: "queued", retried: true });
    const rec = await settle(
      async () => {
        const r = await record(first.id);
        return r?.status === "delivered" ? r : undefined;
      },
      { what: "the retried send delivered" },
    );
    expect(rec.attempts).toBe(ATTEMPTS + 1);
    expect(rec.error).toBeUndefined();
    expect(posted.filter((p) => p.message === "m1")).toHaveLength(ATTEMPTS + 1);

    // Delivered now: a further resend says so and sends nothing.
    expect(await sys.rpc("send", params)).toEqual({ id: first.id, status: "delivered", duplicate: true });
    await quietPeriod(200, "nothing more sent");
    expect(posted.filter((p) => p.message === "m1")).toHaveLength(ATTEMPTS + 1);
  });

  it("whose delivery is in flight answers `active`, not a fresh `queued`", async () => {
    const params = { channel: "slow", to: "u", message: "m2", idempotencyKey: "k2" };
    const first = await sys.rpc("send", params);
    await settle(() => posted.some((p) => p.message === "m2"), { what: "the webhook reached" });
    expect(await sys.rpc("send", params)).toEqual({ id: first.id, status: "active", duplicate: true });
    releaseHang!();
    await settle(async () => (await record(first.id))?.status === "delivered", { what: "the send delivered" });
    expect(posted.filter((p) => p.message === "m2")).toHaveLength(1);
  });
});

describe("GET /v1/deliveries", () => {
  it("answers a message over 128 KB as a marked placeholder, and stays within 6 MB", async () => {
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    const channel = `big${Date.now()}`;
    const big = "x".repeat(1024 * 1024);
    const now = Date.now();
    for (let i = 0; i < 60; i++)
      await log.open({
        id: `big-${channel}-${i}`,
        sessionKey: "agent:main:big",
        kind: "send",
        message: big,
        channel,
        ts: now + i,
      });
    const res = await sys.get(`/v1/deliveries?channel=${channel}&limit=1000`);
    expect(res.status).toBe(200);
    expect(res.body.deliveries).toHaveLength(60);
    expect(res.body.deliveries[0]).toMatchObject({
      id: `big-${channel}-59`,
      message: DELIVERY_OMITTED_TEXT,
      truncated: true,
      bytes: big.length,
    });
    expect(res.body.truncated).toBeUndefined();
    expect(Buffer.byteLength(JSON.stringify(res.body))).toBeLessThan(64 * 1024);
  });

  it("leaves out the oldest records past 6 MB and says so", async () => {
    const log = new DeliveryLog(sys.svc.redis, sys.svc.keys);
    const channel = `many${Date.now()}`;
    const msg = "y".repeat(HISTORY_MESSAGE_MAX_BYTES - 1024); // under the per-message bound
    const now = Date.now();
    const n = 60; // about 7.6 MB in all
    for (let i = 0; i < n; i++)
      await log.open({
        id: `many-${channel}-${i}`,
        sessionKey: "agent:main:many",
        kind: "send",
        message: msg,
        channel,
        ts: now + i,
      });
    const res = await sys.get(`/v1/deliveries?channel=${channel}&limit=1000`);
    expect(res.status).toBe(200);
    expect(res.body.truncated).toBe(true);
    const got = res.body.deliveries as { id: string; message: string }[];
    expect(got.length).toBeGreaterThan(40);
    expect(got.length).toBeLessThan(n);
    expect(got[0]!.id).toBe(`many-${channel}-${n - 1}`);
    expect(got.every((d) => d.message === msg)).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(res.body.deliveries))).toBeLessThanOrEqual(CHAT_HISTORY_MAX_BYTES);
  });

  it("finds a send with no session under `channel:<ch>`, the key it is recorded under", async () => {
    const sent = await sys.rpc("send", { channel: "ok", to: "room", message: "no session here" });
    await settle(async () => (await record(sent.id))?.status === "delivered", { what: "the send delivered" });
    const found = await deliveries(sys, { sessionKey: "channel:ok" });
    expect(found.map((d) => d.id)).toContain(sent.id);
    expect(found.every((d) => d.sessionKey === "channel:ok")).toBe(true);
  });
});
