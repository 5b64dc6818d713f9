/**
 * An announce that cannot be posted: the requester's channel is a webhook that always answers
 * 503. The announce job retries (announceAttempts 3, small backoff) and then stays failed, where
 * an operator sees it: the `announce` queue's failed set (Bull Board's API), `subagents list`
 * (`announce failed`), the delivery record. The requester session still got its completion turn
 * once, and nothing was posted more than once per attempt.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { announceJobId } from "../../src/subagents/announce.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { gatewayMetrics, since } from "../helpers/prometheus.js";
import { queuesQuiet, tool, toolsConfig, textOf } from "../fixtures/tools-support.js";
import { announced, completionTurns, groupRequester, tidesAgent } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

const ATTEMPTS = 3;

/** A webhook that records every POST and always fails. */
class FailingWebhook {
  readonly posts: { headers: IncomingHttpHeaders; body: { id: string; kind: string; message: string } }[] = [];
  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      this.posts.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
      res.writeHead(503, { "content-type": "text/plain" });
      res.end("channel down");
    });
  });
  port = 0;
  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe("an announce that exhausts its retries", () => {
  const hook = new FailingWebhook();
  let sys: TestSystem;

  beforeAll(async () => {
    await hook.start();
    sys = await startTestSystem(
      toolsConfig({
        channels: { hook: { kind: "webhook", url: `http://127.0.0.1:${hook.port}/post`, timeoutMs: 2000 } },
        agents: {
          defaults: { subagents: { announceAttempts: ATTEMPTS, announceBackoffMs: 50, archiveAfterMinutes: 0 } },
          list: [tidesAgent()],
        },
      }),
    );
  });
  afterAll(async () => {
    await sys?.close();
    await hook.close();
  });

  it("lands in the failed set (Bull Board), shows `announce failed` in subagents list, and nothing twice", async () => {
    // A requester whose route is the webhook (its first reply is NO_REPLY: nothing posted).
    const m0 = await gatewayMetrics(sys);
    const requester = await groupRequester(sys, "hook", "g9");

    const spawn = await tool(sys, "sessions_spawn", requester, {
      task: "look up the tides",
      label: "tides",
      cleanup: "delete",
    });
    expect(spawn.status).toBe("accepted");
    const run = await announced(sys, spawn.runId);
    expect(run).toMatchObject({ status: "ok", announce: "failed", frozenResult: "the tide is low at noon" });
    expect(run.announceError).toContain("webhook answered 503");

    // The job is in the announce queue's failed set after all its attempts.
    const jobId = announceJobId(spawn.childSessionKey, spawn.runId);
    const job = await settle(
      async () => {
        const j = await sys.svc.queues.announce.getJob(jobId);
        // Finished as this copy was read (not getState() after getJob: a job failing between the
        // two reads would be "failed" with the copy of its last attempt's start).
        return j?.finishedOn !== undefined ? j : undefined;
      },
      { what: "the announce job failed after all its attempts", timeoutMs: 10_000 },
    );
    expect(await job!.getState()).toBe("failed");
    expect(job!.attemptsMade).toBe(ATTEMPTS);
    expect(job!.failedReason).toContain("webhook answered 503");

    // …which is what Bull Board lists under the queue's failed jobs.
    const board = await sys.get(`/admin/queues/api/queues?activeQueue=announce&status=failed&page=1&jobsPerPage=50`);
    expect(board.status).toBe(200);
    const announceQueue = (
      board.body.queues as {
        name: string;
        counts: Record<string, number>;
        jobs: { id: string; failedReason?: string }[];
      }[]
    ).find((q) => q.name === "announce")!;
    expect(announceQueue.counts.failed).toBeGreaterThanOrEqual(1);
    expect(announceQueue.jobs.find((j) => j.id === jobId)?.failedReason).toContain("webhook answered 503");

    // subagents list shows it, with the error; the run stays listed.
    const list = await tool(sys, "subagents", requester, { action: "list" });
    const item = [...list.active, ...list.recent].find((i: { runId: string }) => i.runId === spawn.runId);
    expect(item).toMatchObject({
      status: "ok",
      announce: "failed",
      announceError: expect.stringContaining("webhook answered 503"),
    });
    expect(list.text).toContain(`[ok, announce failed] ${spawn.childSessionKey}`);

    // The delivery record: failed after one try per attempt, never delivered.
    const posts = (await sys.get(`/v1/deliveries?sessionKey=${encodeURIComponent(requester)}`)).body.deliveries.filter(
      (d: { kind: string }) => d.kind === "subagent_announce",
    );
    expect(posts).toHaveLength(1);
    expect(posts[0]).toMatchObject({
      id: `subagent-announce-${spawn.runId}`,
      status: "failed",
      attempts: ATTEMPTS,
      channel: "hook",
    });

    await queuesQuiet(sys);
    // The webhook saw exactly one POST per attempt, all the same message with the same
    // idempotency key, and nothing else (the requester's replies were NO_REPLY).
    expect(hook.posts).toHaveLength(ATTEMPTS);
    expect(new Set(hook.posts.map((p) => p.headers["idempotency-key"]))).toEqual(
      new Set([`subagent-announce-${spawn.runId}`]),
    );
    expect(new Set(hook.posts.map((p) => p.body.message)).size).toBe(1);
    expect(hook.posts[0]!.body.message).toContain('Sub-agent "tides" completed successfully.');

    // The requester session got its completion turn exactly once, whatever the retries.
    const turns = await completionTurns(sys, requester);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("the tide is low at noon");
    // A failed announce does not clean up: the child is kept for inspection despite cleanup delete.
    expect(await sys.svc.sessions.get(spawn.childSessionKey)).not.toBeNull();

    // Metrics (workers share this process): each failed attempt but the last is a retry, the last a failure.
    const m = await gatewayMetrics(sys);
    expect(since(m0, m, "switchboard_announce_retries_total")).toBe(ATTEMPTS - 1);
    expect(since(m0, m, "switchboard_announce_failures_total")).toBe(1);
    expect(since(m0, m, "switchboard_deliveries_total", { status: "retry" })).toBeGreaterThanOrEqual(ATTEMPTS - 1);
    expect(since(m0, m, "switchboard_deliveries_total", { status: "failed" })).toBeGreaterThanOrEqual(1);
  });
});
