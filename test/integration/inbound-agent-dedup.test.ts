/**
 * POST /v1/inbound messageId de-duplication with more than one agent: one channel message handed
 * to two agents (`agentId`) is two messages, each agent gets it; a retry is still one message per
 * agent. The default agent's de-dup key (and so its derived runId) is the one earlier releases
 * used, a non-default agent's retry finds what an earlier release recorded for it, and what this
 * release handles for a non-default agent is left where an earlier release looks, so a webhook
 * retried across a rolling upgrade, in either direction, does not run twice.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleInbound } from "../../src/inbound/handle-inbound.js";
import { uuidFrom } from "../../src/runs/derived-id.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { history, inbound, runOk } from "../helpers/api.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    session: { dmScope: "per-peer" },
    agents: {
      list: [
        { id: "ops", runtime: { kind: "script", rules: [{ reply: "ops: {{text}}" }] } },
        { id: "main", default: true, runtime: { kind: "script", rules: [{ reply: "main: {{text}}" }] } },
      ],
    },
  });
});

afterAll(async () => {
  await sys?.close();
});

let groups = 0;
function groupMessage(more: Record<string, unknown> = {}) {
  const groupId = `-100${Date.now() % 100_000}${groups++}`;
  return {
    channel: "telegram",
    chatType: "group",
    groupId,
    from: "alice",
    text: "hello both",
    messageId: "42",
    ...more,
  };
}

function userTexts(msgs: { role: string; content: unknown }[]): string[] {
  return msgs
    .filter((m) => m.role === "user")
    .map((m) =>
      typeof m.content === "string" ? m.content : (m.content as { text?: string }[]).map((b) => b.text ?? "").join(""),
    );
}

/** The key an earlier release remembered this message under (channel, account, chat, id; no agent). */
function legacyKey(groupId: string, messageId = "42"): string {
  return `${sys.svc.keys.base}:inmsg:telegram:default:group:${encodeURIComponent(groupId)}:${messageId}`;
}

/**
 * What a gateway of the release before agents were part of the key does with a retry (read from
 * that release's handleInbound): SET NX a `pending:` claim on the agent-less key; if taken, a
 * value without that prefix is its answer, a duplicate whatever agent it names; a claim is waited
 * for until an answer, or the run derived from the key, appears; a claim of its own is handled
 * (`again`) unless that run exists. Its own claim is given back: the test only asks.
 */
async function olderGatewayRetry(key: string): Promise<{ duplicate: Record<string, unknown> } | "again"> {
  const claim = "pending:older-gateway";
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (await sys.svc.redis.set(key, claim, "EX", 30, "NX")) {
      const run = await sys.svc.runs.get(uuidFrom(key));
      await sys.svc.redis.del(key);
      return run ? { duplicate: { runId: run.runId } } : "again";
    }
    const prior = await sys.svc.redis.get(key);
    if (prior && !prior.startsWith("pending:")) return { duplicate: JSON.parse(prior) };
    if (prior) {
      const run = await sys.svc.runs.get(uuidFrom(key));
      if (run) return { duplicate: { runId: run.runId } };
      if (Date.now() > deadline) throw new Error("older gateway: still being handled, retry later");
      await sleep(20);
    }
  }
}

describe("messageId de-dup per agent", () => {
  it("the same channel message to two agents reaches both; a retry of each is one message", async () => {
    const body = groupMessage();
    const main = await inbound(sys, { ...body, agentId: "main" });
    const ops = await inbound(sys, { ...body, agentId: "ops" });
    expect(main).toMatchObject({ agentId: "main", sessionKey: `agent:main:telegram:group:${body.groupId}` });
    expect(ops.duplicate).toBeUndefined();
    expect(ops).toMatchObject({ agentId: "ops", sessionKey: `agent:ops:telegram:group:${body.groupId}` });
    expect(ops.runId).not.toBe(main.runId);
    expect(await runOk(sys, main.runId)).toMatchObject({ reply: "main: hello both" });
    expect(await runOk(sys, ops.runId)).toMatchObject({ reply: "ops: hello both" });

    // The channel retries both webhooks: each agent's is answered with its own run, nothing runs again.
    const mainAgain = await inbound(sys, { ...body, agentId: "main" });
    const opsAgain = await inbound(sys, { ...body, agentId: "ops" });
    expect(mainAgain).toMatchObject({ duplicate: true, agentId: "main", runId: main.runId });
    expect(opsAgain).toMatchObject({ duplicate: true, agentId: "ops", runId: ops.runId, sessionKey: ops.sessionKey });
    expect(userTexts(await history(sys, main.sessionKey))).toEqual(["hello both"]);
    expect(userTexts(await history(sys, ops.sessionKey))).toEqual(["hello both"]);
  });

  it("the default agent keeps the key earlier releases used: no agentId and agentId main are one message", async () => {
    const body = groupMessage();
    const first = await inbound(sys, body);
    expect(first.agentId).toBe("main");
    // Same record, same derived runId as before the agent was part of the key.
    expect(JSON.parse((await sys.svc.redis.get(legacyKey(body.groupId)))!)).toMatchObject({ runId: first.runId });
    expect(first.runId).toBe(uuidFrom(legacyKey(body.groupId)));
    expect(await inbound(sys, { ...body, agentId: "main" })).toMatchObject({ duplicate: true, runId: first.runId });
  });
});

describe("retries across a rolling upgrade (records an earlier release left)", () => {
  it("a retry for ops that an earlier gateway answered is a duplicate, not run again", async () => {
    const body = groupMessage({ agentId: "ops" });
    const sessionKey = `agent:ops:telegram:group:${body.groupId}`;
    const earlier = { ok: true, agentId: "ops", sessionKey, sessionId: "s-before", runId: "r-before" };
    await sys.svc.redis.set(legacyKey(body.groupId), JSON.stringify(earlier), "EX", 600);

    expect(await inbound(sys, body)).toMatchObject({ ...earlier, duplicate: true });
    expect(await sys.svc.sessions.get(sessionKey)).toBeNull();
    expect(await sys.svc.inbox.depth(sessionKey)).toBe(0);
  });

  it("a retry for ops whose turn an earlier gateway queued (its answer never written) joins that run", async () => {
    const body = groupMessage();
    // The ops session exists (an earlier message without an id).
    const before = await inbound(sys, { ...body, messageId: undefined, agentId: "ops", text: "before" });
    await runOk(sys, before.runId);
    // What an earlier gateway that queued the turn and died before recording its answer leaves.
    const runId = uuidFrom(legacyKey(body.groupId));
    await enqueueTurn(sys.svc, {
      runId,
      sessionKey: before.sessionKey,
      agentId: "ops",
      sessionId: before.sessionId,
      text: "hello both",
      step: "turn",
      provenance: "user",
    });

    const retry = await inbound(sys, { ...body, agentId: "ops" });
    expect(retry).toMatchObject({ duplicate: true, runId, agentId: "ops", sessionKey: before.sessionKey });
    await runOk(sys, runId);
    expect(userTexts(await history(sys, before.sessionKey))).toEqual(["before", "hello both"]);
  });

  it("an earlier gateway's claim (no agent in it) holds a retry for ops until its answer names ops", async () => {
    const body = groupMessage({ agentId: "ops" });
    const sessionKey = `agent:ops:telegram:group:${body.groupId}`;
    await sys.svc.redis.set(legacyKey(body.groupId), "pending:older", "EX", 30);
    const retry = inbound(sys, body);
    await sleep(300);
    // The earlier gateway finishes the first delivery.
    const earlier = { ok: true, agentId: "ops", sessionKey, sessionId: "s-before", runId: "r-before" };
    await sys.svc.redis.set(legacyKey(body.groupId), JSON.stringify(earlier), "EX", 600);
    expect(await retry).toMatchObject({ ...earlier, duplicate: true });
    expect(await sys.svc.inbox.depth(sessionKey)).toBe(0);
  });

  it("what an earlier gateway recorded for ops does not answer a message to main (the default agent)", async () => {
    const body = groupMessage();
    const earlier = {
      ok: true,
      agentId: "ops",
      sessionKey: `agent:ops:telegram:group:${body.groupId}`,
      sessionId: "s-before",
      runId: "r-before",
    };
    await sys.svc.redis.set(legacyKey(body.groupId), JSON.stringify(earlier), "EX", 600);
    const main = await inbound(sys, body);
    expect(main.duplicate).toBeUndefined();
    expect(main).toMatchObject({ agentId: "main", sessionKey: `agent:main:telegram:group:${body.groupId}` });
    expect(await runOk(sys, main.runId)).toMatchObject({ reply: "main: hello both" });
    expect(await inbound(sys, body)).toMatchObject({ duplicate: true, runId: main.runId });
    expect(userTexts(await history(sys, main.sessionKey))).toEqual(["hello both"]);
  });

  it("what an earlier gateway recorded for main does not answer a message to ops", async () => {
    const body = groupMessage();
    const sessionKey = `agent:main:telegram:group:${body.groupId}`;
    const earlier = { ok: true, agentId: "main", sessionKey, sessionId: "s-before", runId: "r-before" };
    await sys.svc.redis.set(legacyKey(body.groupId), JSON.stringify(earlier), "EX", 600);
    const ops = await inbound(sys, { ...body, agentId: "ops" });
    expect(ops.duplicate).toBeUndefined();
    expect(await runOk(sys, ops.runId)).toMatchObject({ reply: "ops: hello both" });
  });
});

describe("retries across a rolling upgrade (an earlier gateway reading what this one left)", () => {
  it("a message for ops handled here is a duplicate for an earlier gateway's retry", async () => {
    const body = groupMessage({ agentId: "ops" });
    const ops = await inbound(sys, body);
    expect(await runOk(sys, ops.runId)).toMatchObject({ reply: "ops: hello both" });
    // Left under the key an earlier release reads, in the shape it answers with, for as long.
    const key = legacyKey(body.groupId);
    expect(JSON.parse((await sys.svc.redis.get(key))!)).toEqual({
      ok: true,
      agentId: "ops",
      sessionKey: ops.sessionKey,
      sessionId: ops.sessionId,
      runId: ops.runId,
      isNewSession: true,
    });
    expect(await sys.svc.redis.ttl(key)).toBeGreaterThan(24 * 3600 - 60);
    expect(await olderGatewayRetry(key)).toEqual({ duplicate: expect.objectContaining({ runId: ops.runId }) });
    // And this release's own retry is still answered from the agent's own key.
    expect(await inbound(sys, body)).toMatchObject({ duplicate: true, runId: ops.runId });
    expect(userTexts(await history(sys, ops.sessionKey))).toEqual(["hello both"]);
  });

  it("an earlier gateway's retry arriving while this one still handles the message for ops waits for it", async () => {
    const body = groupMessage({ agentId: "ops" });
    const key = legacyKey(body.groupId);
    // This gateway is slow to handle the message: its session read waits until released.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const sessions = Object.create(sys.svc.sessions) as typeof sys.svc.sessions;
    sessions.get = async (k: string) => {
      await held;
      return await sys.svc.sessions.get(k);
    };
    const first = handleInbound({ ...sys.svc, sessions }, body);
    let older: ReturnType<typeof olderGatewayRetry>;
    try {
      // Claimed where an earlier release looks while it is handled.
      const until = Date.now() + 5000;
      while (!(await sys.svc.redis.get(key))?.startsWith("pending:") && Date.now() < until) await sleep(10);
      expect(await sys.svc.redis.get(key)).toMatch(/^pending:/);
      older = olderGatewayRetry(key);
      await sleep(200);
    } finally {
      release();
    }
    const ops = await first;
    expect(ops.duplicate).toBeUndefined();
    expect(await older).toEqual({ duplicate: expect.objectContaining({ agentId: "ops", runId: ops.runId }) });
    await runOk(sys, ops.runId!);
    expect(userTexts(await history(sys, ops.sessionKey))).toEqual(["hello both"]);
  });

  it("ops handled first, then main (the default agent): main is not taken for ops's duplicate", async () => {
    const body = groupMessage();
    const ops = await inbound(sys, { ...body, agentId: "ops" });
    const main = await inbound(sys, body);
    expect(main.duplicate).toBeUndefined();
    expect(main).toMatchObject({ agentId: "main", sessionKey: `agent:main:telegram:group:${body.groupId}` });
    // Remembered under main's own key, as the legacy one holds ops's message.
    expect(main.runId).toBe(uuidFrom(`${legacyKey(body.groupId)}:agent:main`));
    expect(await runOk(sys, main.runId)).toMatchObject({ reply: "main: hello both" });
    expect(await runOk(sys, ops.runId)).toMatchObject({ reply: "ops: hello both" });
    // A retry of either, here or at an earlier gateway, runs nothing again.
    expect(await inbound(sys, body)).toMatchObject({ duplicate: true, agentId: "main", runId: main.runId });
    expect(await inbound(sys, { ...body, agentId: "ops" })).toMatchObject({ duplicate: true, runId: ops.runId });
    expect(await olderGatewayRetry(legacyKey(body.groupId))).toEqual({
      duplicate: expect.objectContaining({ runId: ops.runId }),
    });
    expect(userTexts(await history(sys, main.sessionKey))).toEqual(["hello both"]);
    expect(userTexts(await history(sys, ops.sessionKey))).toEqual(["hello both"]);
  });

  it("main handled first keeps the legacy key: ops is remembered under its own only", async () => {
    const body = groupMessage();
    const main = await inbound(sys, body);
    const ops = await inbound(sys, { ...body, agentId: "ops" });
    expect(ops.duplicate).toBeUndefined();
    expect(JSON.parse((await sys.svc.redis.get(legacyKey(body.groupId)))!)).toMatchObject({
      agentId: "main",
      runId: main.runId,
    });
    expect(await runOk(sys, ops.runId)).toMatchObject({ reply: "ops: hello both" });
  });
});
