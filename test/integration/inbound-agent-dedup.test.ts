/**
 * POST /v1/inbound messageId de-duplication with more than one agent: one channel message handed
 * to two agents (`agentId`) is two messages, each agent gets it; a retry is still one message per
 * agent. The default agent's de-dup key (and so its derived runId) is the one earlier releases
 * used, and a non-default agent's retry finds what an earlier release recorded for it, so a
 * webhook retried across a rolling upgrade does not run twice.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
