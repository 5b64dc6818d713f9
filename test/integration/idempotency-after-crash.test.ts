/**
 * A gateway that dies (kill -9, or its Redis restarted) while handling a send leaves its
 * idempotency claim behind. A retry with the same idempotencyKey / messageId must then either
 * queue the message or say it could not (a retryable 503), never acknowledge a message that was
 * never queued. Found by the chaos suite; these tests recreate the state such a crash leaves.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uuidFrom } from "../../src/runs/derived-id.js";
import { canonicalSessionKey } from "../../src/session/key-canonical.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptConfig, timedWait } from "../fixtures/runs-support.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(scriptConfig([{ reply: "re: {{text}}" }]));
});

afterAll(async () => {
  await sys?.close();
});

describe("idempotent sends after a crash mid-send", () => {
  it("agent: a claim left by a dead gateway does not turn the retry into a lost message", async () => {
    const key = canonicalSessionKey(sys.config, "crashy", { agentId: "main" });
    const runId = uuidFrom(`${key}\nk-crash`);
    // What a gateway killed between claiming the key and queueing the turn leaves behind.
    await sys.svc.redis.set(`${sys.svc.keys.base}:agentidem:${runId}`, "1", "EX", 60);

    const r = await sys.rpc("agent", { sessionKey: "crashy", message: "after the crash", idempotencyKey: "k-crash" });
    expect(r.runId).toBe(runId);
    expect((await timedWait(sys, runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after the crash" });
  });

  it("inbound: a messageId claim left pending by a dead gateway is not acked until the message is queued", async () => {
    const messageId = "tg-crash-1";
    const body = { channel: "telegram", chatType: "dm", from: "crashy", text: "after the crash", messageId };
    // What a gateway killed after claiming the messageId, before queueing the turn, leaves behind.
    const claimKey = `${sys.svc.keys.base}:inmsg:telegram:default:dm:crashy:${messageId}`;
    await sys.svc.redis.set(claimKey, "pending:dead-gateway", "EX", 60);

    const first = await sys.post("/v1/inbound", body);
    // Not acknowledged: the caller is told to retry (and nothing claims it was accepted).
    expect(first.status).toBe(503);
    expect(first.body).toMatchObject({ ok: false, error: { code: "unavailable" } });

    // The dead gateway's claim expires; the channel's retry is handled and answered.
    await sys.svc.redis.del(claimKey);
    const retry = await sys.post("/v1/inbound", body);
    expect(retry.status).toBe(202);
    expect(retry.body.runId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await timedWait(sys, retry.body.runId, 10_000)).result).toMatchObject({
      status: "ok",
      reply: "re: after the crash",
    });
  }, 30_000);

  it("inbound: a pending claim whose turn was already queued answers with that run at once", async () => {
    const body = {
      channel: "telegram",
      chatType: "dm",
      from: "crashy2",
      text: "queued then crashed",
      messageId: "tg-crash-2",
    };
    const a = await sys.post("/v1/inbound", body);
    expect(a.status).toBe(202);
    // As if the gateway died after queueing the turn, before recording its answer.
    const claimKey = `${sys.svc.keys.base}:inmsg:telegram:default:dm:crashy2:tg-crash-2`;
    await sys.svc.redis.set(claimKey, "pending:dead-gateway", "EX", 60);

    const t0 = Date.now();
    const b = await sys.post("/v1/inbound", body);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(b.status).toBe(202);
    expect(b.body).toMatchObject({ duplicate: true, runId: a.body.runId, sessionId: a.body.sessionId });
  });
});
