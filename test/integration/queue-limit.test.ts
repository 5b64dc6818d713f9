/**
 * gateway.limits.maxQueuedTurns (docs/concepts/limits.md): with no worker running, a session's
 * inbox fills up; past the limit every door refuses a new turn with 429 queue_full (a tool with a
 * tool error of that code), other sessions are unaffected, a resent request for a turn already
 * queued is answered as before, and internal pushes are always queued. Once a worker starts,
 * the queued turns all run in order and new ones are accepted again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { conversation, readTranscript, scriptConfig } from "../fixtures/runs-support.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { QUEUE_FULL_RETRY_AFTER_SECONDS, QueueFullError } from "../../src/errors/queue-full.js";
import { httpStatusOf } from "../../src/errors/index.js";

const LIMIT = 3;
const RPC_KEY = "agent:main:q-rpc";
const TOOL_TARGET = "agent:main:q-tool";

let sys: TestSystem;
let worker: TestSystem | undefined;

beforeAll(async () => {
  sys = await startTestSystem(
    scriptConfig([{ delayMs: 2, reply: "re: {{text}}" }], {
      gateway: { limits: { maxQueuedTurns: LIMIT } },
      tools: { sessions: { visibility: "all" } },
    }),
    { gateway: true, workers: false },
  );
});

afterAll(async () => {
  await worker?.close();
  await sys?.close();
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(sys.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
}

const dm = (from: string, text: string, messageId?: string) =>
  post("/v1/inbound", { channel: "telegram", chatType: "dm", from, text, ...(messageId ? { messageId } : {}) });
const agent = (message: string, idempotencyKey: string) =>
  post("/v1/rpc/agent", { sessionKey: RPC_KEY, message, idempotencyKey });
const depth = (sessionKey: string) => sys.svc.inbox.depth(sessionKey);

describe("maxQueuedTurns", () => {
  const inboundRuns: string[] = [];
  const rpcRuns: string[] = [];
  let inboundKey = "";

  it("maps queue_full to 429", () => {
    expect(httpStatusOf("queue_full")).toBe(429);
  });

  it("inbound: the turn past the limit is refused with 429 queue_full and Retry-After", async () => {
    for (let i = 1; i <= LIMIT; i++) {
      const r = await dm("alice", `a${i}`, `m${i}`);
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      inboundRuns.push(r.body.runId);
      inboundKey = r.body.sessionKey;
    }
    const refused = await dm("alice", "a4", "m4");
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe(String(QUEUE_FULL_RETRY_AFTER_SECONDS));
    expect(refused.body.ok).toBe(false);
    expect(refused.body.error.code).toBe("queue_full");
    expect(refused.body.error.message).toContain(inboundKey);
    expect(refused.body.error.message).toContain(`maxQueuedTurns is ${LIMIT}`);
    expect(await depth(inboundKey)).toBe(LIMIT);
    // A message resent with the id of one already queued is answered with its run, not refused.
    const resent = await dm("alice", "a2", "m2");
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ runId: inboundRuns[1], duplicate: true });
    // The refused message gave its id back: a retry of it is refused again, not "duplicate".
    expect((await dm("alice", "a4", "m4")).status).toBe(429);
  });

  it("another session is unaffected", async () => {
    const r = await dm("bob", "b1");
    expect(r.status).toBe(202);
    expect(await depth(r.body.sessionKey)).toBe(1);
  });

  it("agent RPC: 429 queue_full past the limit; a resent idempotencyKey is not refused", async () => {
    for (let i = 1; i <= LIMIT; i++) {
      const r = await agent(`r${i}`, `k${i}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      rpcRuns.push(r.body.result.runId);
    }
    const refused = await agent("r4", "k4");
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe(String(QUEUE_FULL_RETRY_AFTER_SECONDS));
    expect(refused.body.error.code).toBe("queue_full");
    expect(refused.body.error.message).toContain(RPC_KEY);
    const resent = await agent("r2", "k2");
    expect(resent.status).toBe(200);
    expect(resent.body.result).toMatchObject({ runId: rpcRuns[1], duplicate: true });
    expect(await depth(RPC_KEY)).toBe(LIMIT);
  });

  it("the push script itself: a resent push of a queued turn answers exists, never queue_full", async () => {
    const run = await sys.svc.runs.get(rpcRuns[0]!);
    expect(run).not.toBeNull();
    // The very turn pushed again (as ioredis resends a command after a reconnect).
    const turn = {
      runId: rpcRuns[0]!,
      sessionKey: RPC_KEY,
      agentId: "main",
      sessionId: run!.sessionId!,
      text: "r1",
      step: "turn" as const,
      provenance: "user" as const,
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
    };
    expect(await sys.svc.inbox.push(turn, { maxQueued: LIMIT })).toBe("exists");
    const fresh = { ...turn, runId: "00000000-0000-4000-8000-00000000beef" };
    const err = await sys.svc.inbox.push(fresh, { maxQueued: LIMIT }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueFullError);
    expect(err).toMatchObject({ code: "queue_full", sessionKey: RPC_KEY, limit: LIMIT, queued: LIMIT });
    expect(await sys.svc.runs.get(fresh.runId)).toBeNull();
    expect(await depth(RPC_KEY)).toBe(LIMIT);
  });

  it("the OpenAI door answers 429 queue_full in OpenAI's shape", async () => {
    const r = await post(
      "/v1/chat/completions",
      { model: "main", messages: [{ role: "user", content: "o1" }] },
      { "x-switchboard-session-key": RPC_KEY },
    );
    expect(r.status).toBe(429);
    expect(r.retryAfter).toBe(String(QUEUE_FULL_RETRY_AFTER_SECONDS));
    expect(r.body.error).toMatchObject({ code: "queue_full" });
    expect(r.body.error.message).toContain(RPC_KEY);
  });

  it("sessions_send into a full session: a tool error with code queue_full", async () => {
    for (let i = 1; i <= LIMIT; i++) {
      const r = await post("/v1/tools/sessions_send", {
        sessionKey: "agent:main:q-sender",
        args: { sessionKey: TOOL_TARGET, message: `t${i}`, timeoutSeconds: 0 },
      });
      expect(r.body.result ?? r.body, JSON.stringify(r.body)).toMatchObject({ status: "accepted" });
    }
    const r = await post("/v1/tools/sessions_send", {
      sessionKey: "agent:main:q-sender",
      args: { sessionKey: TOOL_TARGET, message: "t4", timeoutSeconds: 0 },
    });
    expect(r.status).toBe(200);
    expect(r.body.result ?? r.body).toMatchObject({
      status: "error",
      code: "queue_full",
      limit: LIMIT,
      sessionKey: TOOL_TARGET,
    });
    expect(await depth(TOOL_TARGET)).toBe(LIMIT);
  });

  it("an internal push (as a continuation, announce or replay makes) is queued into a full session", async () => {
    const run = await sys.svc.runs.get(rpcRuns[0]!);
    const turn = await enqueueTurn(sys.svc, {
      sessionKey: RPC_KEY,
      agentId: "main",
      sessionId: run!.sessionId!,
      text: "internal",
      step: "turn",
      provenance: "inter_session",
    });
    rpcRuns.push(turn.runId);
    expect(await depth(RPC_KEY)).toBe(LIMIT + 1);
  });

  it("once a worker runs, every queued turn runs in order and new turns are accepted again", async () => {
    worker = await startPeer(sys.config, { gateway: false, workers: {} });
    for (const runId of [...inboundRuns, ...rpcRuns]) {
      const w = await sys.rpc("agent.wait", { runId, timeoutMs: 20_000 });
      expect(w.status, runId).toBe("ok");
    }
    const rpcRun = await sys.svc.runs.get(rpcRuns[0]!);
    const said = conversation(readTranscript(sys.config, rpcRun!.sessionId!))
      .filter((m) => m.role === "user")
      .map((m) => m.text);
    expect(said).toEqual(["r1", "r2", "r3", "internal"]);
    const inboundRun = await sys.svc.runs.get(inboundRuns[0]!);
    const inboundSaid = conversation(readTranscript(sys.config, inboundRun!.sessionId!))
      .filter((m) => m.role === "user")
      .map((m) => m.text);
    expect(inboundSaid).toEqual(["a1", "a2", "a3"]);

    const again = await dm("alice", "a5", "m5");
    expect(again.status).toBe(202);
    const rpcAgain = await agent("r5", "k5");
    expect(rpcAgain.status).toBe(200);
    for (const runId of [again.body.runId, rpcAgain.body.result.runId]) {
      expect((await sys.rpc("agent.wait", { runId, timeoutMs: 20_000 })).status).toBe("ok");
    }
  });
});
