/**
 * A sub-agent's announce to its requester's chat waits in that chat's delivery lane behind an
 * earlier message still being retried (docs/concepts/reliability.md, "Replies reach a chat in
 * order"); its requester session is deleted meanwhile, so the announce ends without posting. Its
 * delivery must not hold the chat until the orphan rule passes it: the announce job settles it
 * (no_route) itself, the chat's next message goes as soon as the earlier one is settled, and
 * nothing counts as orphaned. Real webhook (node:http), real Redis, gateway + workers here.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { announceJobId } from "../../src/subagents/announce.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { gatewayMetrics, since } from "../helpers/prometheus.js";
import { tool, toolsConfig } from "../fixtures/tools-support.js";
import { groupRequester, tidesAgent } from "../fixtures/subagents-support.js";
import { deliveries, entryOf } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";

/** With 0.2 s doubling, a message failing for good is retried for 6.2 s: the announce waits meanwhile. */
const ATTEMPTS = 6;

let server: Server;
let sys: TestSystem;
const posts: { id: string; message: string; ok: boolean }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const body = JSON.parse(raw) as { id: string; message: string };
      const ok = !body.message.includes("[fail]");
      posts.push({ id: body.id, message: body.message, ok });
      res.writeHead(ok ? 200 : 503).end(ok ? "{}" : "try later");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  sys = await startTestSystem(
    toolsConfig({
      workers: { deliveryAttempts: ATTEMPTS, deliveryBackoffMs: 200 },
      channels: { hook: { kind: "webhook", url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` } },
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0 } },
        list: [tidesAgent()],
      },
    }),
  );
});

afterAll(async () => {
  await sys?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("an announce waiting in its chat's lane", () => {
  it("whose requester is deleted meanwhile settles its delivery itself and holds the chat no longer", async () => {
    // A requester whose route is the webhook (its first reply is NO_REPLY: nothing posted).
    const m0 = await gatewayMetrics(sys);
    const requester = await groupRequester(sys, "hook", "g7");
    const route = (await entryOf(sys, requester)).deliveryContext as { channel: string; to: string };

    // A message to the same chat that the webhook refuses: first in the chat's lane for 6 s.
    const held = await sys.rpc("send", {
      sessionKey: requester,
      channel: route.channel,
      to: route.to,
      message: "[fail] held",
    });
    await settle(() => posts.some((p) => p.id === held.id), { what: "the held message tried", timeoutMs: 10_000 });

    const spawn = await tool(sys, "sessions_spawn", requester, { task: "look up the tides", cleanup: "keep" });
    expect(spawn.status).toBe("accepted");
    const jobId = announceJobId(spawn.childSessionKey, spawn.runId);
    await settle(async () => (await sys.svc.queues.announce.getJobLogs(jobId)).logs.find((l) => l.includes(held.id)), {
      what: "the announce waiting behind the held message",
      timeoutMs: 15_000,
    });

    await sys.rpc("sessions.delete", { key: requester });
    const announceId = `subagent-announce-${spawn.runId}`;
    const settledAnnounce = await settle(
      async () => (await deliveries(sys, { limit: 1000 })).find((d) => d.id === announceId && d.status !== "pending"),
      { what: "the announce's delivery settled by its job", timeoutMs: 15_000 },
    );
    expect(settledAnnounce).toMatchObject({ status: "no_route", error: "the announce ended without posting" });
    expect(posts.some((p) => p.id === announceId)).toBe(false);

    // The chat goes on right after the held message fails for good, nothing passed as orphaned.
    const after = await sys.rpc("send", {
      sessionKey: "agent:main:hook:other",
      channel: route.channel,
      to: route.to,
      message: "after",
    });
    await settle(() => posts.some((p) => p.id === after.id && p.ok), {
      what: "the next message sent",
      timeoutMs: 20_000,
    });
    expect(posts.filter((p) => p.id === held.id)).toHaveLength(ATTEMPTS);
    expect(since(m0, await gatewayMetrics(sys), "switchboard_deliveries_total", { status: "orphaned" })).toBe(0);
  }, 60_000);
});
