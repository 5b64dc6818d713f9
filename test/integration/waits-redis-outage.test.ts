/**
 * `agent.wait` across a Redis outage never says `run_not_found` for a run that exists: a wait
 * whose timeout fires while Redis is away answers `timeout` (the run was not seen to finish),
 * and a wait that cannot reach Redis at all fails with a server error the caller can retry.
 * Found by the chaos suite (a gateway-only process answered `run_not_found` for queued runs
 * while its Redis restarted).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { newRedis } from "../helpers/context.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { inbound, scriptConfig } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";

let redis: PrivateRedis;
/** A gateway-only process and no workers: the run stays queued. */
let gw: TestSystem;
let redisDown = false;

beforeAll(async () => {
  redis = await startPrivateRedis({ appendonly: true, appendfsync: "always" });
  gw = await startTestSystem(scriptConfig([{ reply: "re: {{text}}" }], { redis: { url: redis.url } }), {
    gateway: true,
    workers: false,
  });
});

afterAll(async () => {
  if (redisDown) await redis.start().catch(() => {});
  await gw?.close();
  await redis?.cleanup();
}, 30_000);

/** HGETALL calls Redis has served (a wait reads its run record with one). */
async function hgetallCalls(): Promise<number> {
  const r = newRedis(redis.url);
  try {
    const m = /cmdstat_hgetall:calls=(\d+)/.exec(await r.info("commandstats"));
    return m ? Number(m[1]) : 0;
  } finally {
    r.disconnect();
  }
}

async function waitCall(runId: string, timeoutMs: number): Promise<{ status: number; body: any }> {
  return await gw.post("/v1/rpc/agent.wait", { runId, timeoutMs });
}

describe("agent.wait during a Redis outage", () => {
  it("a wait whose timeout fires while Redis is away answers timeout, not run_not_found", async () => {
    const r = await inbound(gw, "outage", "hello");
    const reads = await hgetallCalls();
    const pending = waitCall(r.runId, 1500);
    // The wait has read the run record (and registered) once Redis saw that read; then Redis
    // goes away until after the wait's timeout.
    await settle(async () => (await hgetallCalls()) > reads, {
      what: "the wait reading the run record from Redis",
      timeoutMs: 5000,
      stepMs: 10,
    });
    redisDown = true;
    await redis.kill9();
    const answer = await pending;
    await redis.start();
    redisDown = false;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ ok: true, result: { runId: r.runId, status: "timeout", runStatus: "queued" } });
  });

  it("a wait that cannot read the run at all fails with a retryable server error, not run_not_found", async () => {
    const r = await inbound(gw, "outage2", "hello");
    redisDown = true;
    await redis.kill9();
    const answer = await waitCall(r.runId, 500);
    await redis.start();
    redisDown = false;
    expect(answer.status).toBeGreaterThanOrEqual(500);
    expect(JSON.stringify(answer.body)).not.toContain("run_not_found");
    // And once Redis is back, the same wait answers truthfully.
    const again = await waitCall(r.runId, 200);
    expect(again.body).toMatchObject({ ok: true, result: { status: "timeout", runStatus: "queued" } });
  });
});
