/**
 * OpenClaw conformance and owner security, end to end over HTTP: what a user moving over from
 * OpenClaw relies on. Owner-only `/send`, one sanitiser on every hand-off path (sessions_send
 * reply, reply-back turns, announce and chat deliveries), thread keys refused as sessions_send
 * targets, inter-session input marked and traced, secrets masked before they are stored.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { sessionsCommand } from "../../src/cli/commands/sessions.js";
import {
  chat,
  deliveries,
  isInterSessionUser,
  scriptAgent,
  queuesQuiet,
  textOf,
  tool,
  toolsConfig,
  transcript,
  type Msg,
} from "../fixtures/tools-support.js";
import { settle } from "../helpers/settle.js";

const ALICE = "agent:alice:main";
const BOB = "agent:bob:main";
const THREAD_ERROR =
  "sessions_send cannot target a thread session for inter-agent coordination. " +
  "Use the parent channel session key instead.";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      commands: { ownerAllowFrom: ["tg:boss", "*"] },
      // Messages stamped up to a day ahead count for the lifecycle: the tests move time that way.
      gateway: { limits: { timestampAheadMs: 86_400_000 } },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true }, deny: ["sessions_spawn"] },
      session: {
        agentToAgent: { maxPingPongTurns: 1 },
        resetTriggers: ["/fresh"],
        resetByChannel: {
          idlechan: { mode: "idle", idleMinutes: 30 },
          heartbeat: { mode: "idle", idleMinutes: 30 },
          "cron-event": { mode: "idle", idleMinutes: 30 },
          "exec-event": { mode: "idle", idleMinutes: 30 },
        },
      },
      agents: {
        defaults: { models: { "anthropic/claude-opus-4": { alias: "opus" }, "minimax/m2.7": {} } },
        list: [
          scriptAgent("alice", [{ when: { step: "reply" }, reply: "REPLY_SKIP" }, { reply: "alice: {{text}}" }], {
            default: true,
          }),
          scriptAgent("bob", [
            { when: { step: "announce" }, reply: "<think>announce draft with internal notes</think>Bob is done." },
            { when: { contains: "mark?" }, reply: "{{prompt}}" },
            { when: { contains: "key" }, reply: "noted {{text}}" },
            { reply: "<thinking>the user wants X; plan: say Y</thinking>Bob answer<|im_end|>" },
          ]),
        ],
      },
    }),
  );
  await chat(sys, "alice", "1", "hi alice");
  await chat(sys, "bob", "99", "hi bob");
});

afterAll(async () => {
  await sys?.close();
});

describe("owner-only /send (commands.ownerAllowFrom)", () => {
  const group = (from: string, text: string) => ({
    channel: "tg",
    chatType: "group",
    from,
    groupId: "ops-room",
    groupSubject: "Ops",
    text,
    agentId: "alice",
  });
  const key = "agent:alice:tg:group:ops-room";

  it("a non-owner's /send changes nothing and gets a refusal; a wildcard entry makes nobody an owner", async () => {
    const res = await sys.post("/v1/inbound", group("mallory", "/send off"));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ command: "send", refused: "not_owner" });
    expect(res.body.sendPolicy).toBeUndefined();
    expect((await sys.svc.sessions.get(key))?.sendPolicy).toBeUndefined();
    const refusal = await settle(
      async () => (await deliveries(sys, key)).find((d) => d.message.includes("Only an owner")),
      { what: "the owner-only refusal delivered to the group" },
    );
    expect(refusal).toMatchObject({ channel: "tg", to: "ops-room" });
    // The group is still heard: the next message runs.
    const next = await sys.post("/v1/inbound", group("mallory", "still here"));
    expect(next.body.blocked).toBeUndefined();
    expect(next.body.runId).toBeDefined();
  });

  it("an owner listed as channel:id mutes the group", async () => {
    const res = await sys.post("/v1/inbound", group("boss", "/send off"));
    expect(res.body).toMatchObject({ command: "send", sendPolicy: "deny" });
    expect((await sys.svc.sessions.get(key))?.sendPolicy).toBe("deny");
    expect((await sys.post("/v1/inbound", group("mallory", "hello?"))).body.blocked).toBe("send_policy_deny");
    await sys.post("/v1/inbound", group("boss", "/send inherit"));
    expect((await sys.svc.sessions.get(key))?.sendPolicy).toBeUndefined();
  });
});

describe("one sanitiser for everything handed to another agent or a channel", () => {
  it("sessions_send reply, reply-back turn and announce delivery carry no reasoning or control tokens", async () => {
    const before = (await transcript(sys, ALICE)).length;
    const res = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "status?", timeoutSeconds: 10 });
    expect(res).toMatchObject({ status: "ok", reply: "Bob answer" });
    await queuesQuiet(sys);
    // The reply-back turn in the requester got the cleaned reply as its text.
    const replyBack = (await transcript(sys, ALICE)).slice(before).filter(isInterSessionUser);
    expect(replyBack.map(textOf)).toEqual(["Bob answer"]);
    // The announce post to Bob's channel is cleaned too.
    const announce = (await deliveries(sys, BOB)).find(
      (d) => d.kind === "announce" || d.message.includes("Bob is done"),
    );
    expect(announce?.message).toBe("Bob is done.");
    // The target's own transcript keeps what its model wrote.
    expect((await transcript(sys, BOB)).map(textOf).join("\n")).toContain("<thinking>the user wants X");
  });

  it("a chat reply delivered to the channel is cleaned as well", async () => {
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "dm",
      from: "99",
      text: "what now?",
      agentId: "bob",
    });
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    const d = await settle(async () => (await deliveries(sys, BOB)).find((x) => x.id === `reply-${r.body.runId}`), {
      what: "bob's reply delivered",
    });
    expect(d.message).toBe("Bob answer");
  });
});

describe("sessions_send targets", () => {
  it("refuses a thread-scoped key with OpenClaw's text, and runs nothing", async () => {
    const target = "agent:bob:slack:channel:c1:thread:1699999999.0001";
    const res = await tool(sys, "sessions_send", ALICE, { sessionKey: target, message: "psst", timeoutSeconds: 0 });
    expect(res).toMatchObject({ status: "error", error: THREAD_ERROR });
    expect(res.runId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await sys.get(`/v1/runs/${res.runId}`)).status).toBe(404);
    expect(await sys.svc.sessions.get(target)).toBeNull();
  });
});

describe("inter-session input", () => {
  it("reaches the runtime marked isUser=false, and its transcript line names source session and run", async () => {
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "mark? please",
      timeoutSeconds: 10,
    });
    expect(res.status).toBe("ok");
    expect(res.reply).toMatch(
      new RegExp(
        String.raw`^\[Inter-session message\] sourceSession=agent:alice:main .*sourceTool=sessions_send.* ` +
          String.raw`isUser=false\nmark\? please$`,
      ),
    );
    await queuesQuiet(sys);
    const bobLines = await transcript(sys, BOB);
    const received = bobLines.find((m: Msg) => m.role === "user" && textOf(m) === "mark? please");
    expect(received?.provenance).toMatchObject({
      kind: "inter_session",
      sourceSessionKey: ALICE,
      sourceTool: "sessions_send",
    });
    // The reply-back into Alice names Bob's run that produced it.
    const back = (await transcript(sys, ALICE)).filter(isInterSessionUser).at(-1)!;
    expect(back.provenance).toMatchObject({ kind: "inter_session", sourceSessionKey: BOB, sourceRunId: res.runId });
  });
});

describe("secrets are not persisted", () => {
  it("the transcript stores the masked key while the turn itself saw the original", async () => {
    const secret = "sk-proj-Abcdefghijklmnop1234567890x5jK0";
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "dm",
      from: "99",
      text: `my key ${secret}`,
      agentId: "bob",
    });
    const w = await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    expect(w.reply).toBe(`noted my key ${secret}`); // the runtime got the real text
    const stored = JSON.stringify(await transcript(sys, BOB));
    expect(stored).not.toContain(secret);
    expect(stored).toContain("my key sk-pro…5jK0");
    expect(stored).toContain("noted my key sk-pro…5jK0");
  });
});

describe("resets as OpenClaw documents them", () => {
  const post = async (body: Record<string, unknown>) => {
    const r = await sys.post("/v1/inbound", { agentId: "alice", ...body });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    return r.body;
  };
  const replyOf = async (runId: string) => (await sys.rpc("agent.wait", { runId, timeoutMs: 10_000 })).reply;

  it("custom resetTriggers add to /new and /reset; in groups a trigger after a mention works", async () => {
    const g = { channel: "tg", chatType: "group", groupId: "notes", from: "u5" };
    const first = await post({ ...g, text: "hello" });
    await replyOf(first.runId);
    const mention = await post({ ...g, text: "<@bot> /new take notes" });
    expect(mention).toMatchObject({ isNewSession: true, resetReason: "new" });
    expect(mention.sessionId).not.toBe(first.sessionId);
    expect(await replyOf(mention.runId)).toBe("alice: take notes");
    const custom = await post({ ...g, text: "@bot /fresh start over" });
    expect(custom).toMatchObject({ isNewSession: true, resetReason: "fresh" });
    expect(await replyOf(custom.runId)).toBe("alice: start over");
    const builtin = await post({ channel: "tg", chatType: "dm", from: "u6", text: "/reset again" });
    expect(builtin).toMatchObject({ resetReason: "reset" });
  });

  it("/new <model> takes aliases, provider/model, provider model and a provider's only model", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "u7" };
    const cases: [string, { provider: string; model: string }, string][] = [
      ["/new opus take notes", { provider: "anthropic", model: "claude-opus-4" }, "take notes"],
      ["/new minimax summarize", { provider: "minimax", model: "m2.7" }, "summarize"],
      ["/new anthropic claude-opus-4 plan", { provider: "anthropic", model: "claude-opus-4" }, "plan"],
      ["/new minimax/m2.7 go", { provider: "minimax", model: "m2.7" }, "go"],
    ];
    for (const [text, want, rest] of cases) {
      const r = await post({ ...dm, text });
      expect(await replyOf(r.runId), text).toBe(`alice: ${rest}`);
      const e = await sys.svc.sessions.get(r.sessionKey);
      expect({ provider: e?.providerOverride, model: e?.modelOverride }, text).toEqual(want);
    }
  });

  it("/new carries toggles but not sendPolicy; a stale rollover clears them; sessions.reset keeps them", async () => {
    const T = Date.now();
    const dm = { channel: "idlechan", chatType: "dm", from: "u8" };
    const start = await post({ ...dm, text: "hi", timestamp: T });
    await replyOf(start.runId);
    const key = start.sessionKey;
    const toggles = { label: "keeper", model: "claude-opus-4", thinkingLevel: "high", sendPolicy: "allow" };
    await sys.rpc("sessions.patch", { key, ...toggles });

    const explicit = await post({ ...dm, text: "/new", timestamp: T + 1000 });
    await replyOf(explicit.runId);
    expect(await sys.svc.sessions.get(key)).toMatchObject({
      label: "keeper",
      modelOverride: "claude-opus-4",
      thinkingLevel: "high",
    });
    expect((await sys.svc.sessions.get(key))?.sendPolicy).toBeUndefined();

    await sys.rpc("sessions.patch", { key, sendPolicy: "allow" });
    const stale = await post({ ...dm, text: "back after lunch", timestamp: T + 45 * 60_000 });
    expect(stale).toMatchObject({ isNewSession: true, resetReason: "idle" });
    await replyOf(stale.runId);
    const after = await sys.svc.sessions.get(key);
    for (const f of ["label", "modelOverride", "thinkingLevel", "sendPolicy"] as const)
      expect(after?.[f], f).toBeUndefined();
    expect(after?.totalTokens ?? 0).toBe(0);

    await sys.rpc("sessions.patch", { key, ...toggles });
    const reset = await sys.rpc("sessions.reset", { key });
    expect(reset).toBeDefined();
    expect(await sys.svc.sessions.get(key)).toMatchObject({
      label: "keeper",
      modelOverride: "claude-opus-4",
      thinkingLevel: "high",
      sendPolicy: "allow",
    });
  });
});

describe("Telegram forum topics and group origins", () => {
  it("a topic session writes <sessionId>-topic-<threadId>.jsonl and every reader finds it", async () => {
    const r = await sys.post("/v1/inbound", {
      channel: "telegram",
      chatType: "group",
      groupId: "-1001234567890",
      threadId: 99,
      from: "u9",
      text: "in the topic",
      agentId: "alice",
    });
    expect(r.body.sessionKey).toBe("agent:alice:telegram:group:-1001234567890:topic:99");
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    const dir = join(sys.config.storage.dir, "agents", "alice", "sessions");
    expect(existsSync(join(dir, `${r.body.sessionId}-topic-99.jsonl`))).toBe(true);
    expect(existsSync(join(dir, `${r.body.sessionId}.jsonl`))).toBe(false);
    expect((await transcript(sys, r.body.sessionKey)).map(textOf)).toEqual(["in the topic", "alice: in the topic"]);
    const hist = await tool(sys, "sessions_history", ALICE, { sessionKey: r.body.sessionKey });
    expect(hist.messages.map(textOf)).toEqual(["in the topic", "alice: in the topic"]);
    const listed = await tool(sys, "sessions_list", ALICE, { search: "topic:99" });
    expect(listed.sessions[0].transcriptPath).toBe(join(dir, `${r.body.sessionId}-topic-99.jsonl`));
  });

  it("a group's origin label is its subject, not the sender", async () => {
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "group",
      groupId: "labels",
      from: "u1",
      senderName: "Ursula",
      groupSubject: "Release crew",
      text: "hi",
      agentId: "alice",
    });
    expect((await sys.svc.sessions.get(r.body.sessionKey))?.origin).toMatchObject({
      label: "Release crew",
      from: "u1",
    });
  });
});

describe("sessionIds wherever keys go; the sessions CLI pages", () => {
  it("sessions_history takes a sessionId, and so does the calling session of any tool", async () => {
    const bob = (await sys.svc.sessions.get(BOB))!;
    const byId = await tool(sys, "sessions_history", ALICE, { sessionKey: bob.sessionId, limit: 2 });
    expect(byId.sessionKey).toBe(BOB);
    expect(byId.messages.length).toBe(2);
    const asBob = await tool(sys, "sessions_list", bob.sessionId, { search: "agent:bob:main" });
    // Listed as Bob sees himself: his own main session, shown as `main`.
    expect(asBob.sessions.map((r: { key: string; sessionId: string }) => [r.key, r.sessionId])).toEqual([
      ["main", bob.sessionId],
    ]);
  });

  it("sessions.list pages with offset/nextOffset and `switchboard sessions` goes past 200 rows", async () => {
    const N = 450;
    const t0 = Date.now() - 10 * 86_400_000;
    for (let i = 0; i < N; i++) {
      await sys.svc.sessions.upsert(
        `agent:bulk:s${i}`,
        { agentId: "bulk", kind: "other" },
        { sessionId: `bulk-${i}` },
        { now: t0 + i * 1000 },
      );
    }
    const p1 = await sys.rpc("sessions.list", { agentId: "bulk", limit: 200 });
    const p2 = await sys.rpc("sessions.list", { agentId: "bulk", limit: 200, offset: p1.nextOffset });
    const p3 = await sys.rpc("sessions.list", { agentId: "bulk", limit: 200, offset: p2.nextOffset });
    expect([p1.count, p2.count, p3.count, p1.nextOffset, p2.nextOffset, p3.nextOffset]).toEqual([
      200,
      200,
      50,
      200,
      400,
      undefined,
    ]);
    const keys = [...p1.sessions, ...p2.sessions, ...p3.sessions].map((e: { key: string }) => e.key);
    expect(new Set(keys).size).toBe(N);
    expect(keys[0]).toBe(`agent:bulk:s${N - 1}`); // newest first, across pages

    const cli = async (extra: Record<string, unknown>) => {
      const out: string[] = [];
      const write = process.stdout.write.bind(process.stdout);
      process.stdout.write = ((chunk: string) => {
        out.push(String(chunk));
        return true;
      }) as typeof process.stdout.write;
      try {
        expect(await sessionsCommand({ url: sys.url!, json: true, agent: "bulk", ...extra })).toBe(0);
      } finally {
        process.stdout.write = write;
      }
      return JSON.parse(out.join("")) as { count: number; sessions: { key: string }[] };
    };
    expect((await cli({})).count).toBe(200);
    expect((await cli({ limit: "300" })).count).toBe(300);
    const all = await cli({ all: true });
    expect(all.count).toBe(N);
    expect(new Set(all.sessions.map((r) => r.key)).size).toBe(N);
  });
});

describe("cron, hook and node sessions", () => {
  it("the agent RPC takes their documented keys; they list with their kinds", async () => {
    for (const [key, stored, kind] of [
      ["cron:nightly-report", "agent:alice:cron:nightly-report", "cron"],
      ["hook:5b0e7b4e-1111-4000-8000-000000000001", "agent:alice:hook:5b0e7b4e-1111-4000-8000-000000000001", "hook"],
      ["node-macbook", "agent:alice:node-macbook", "node"],
    ] as const) {
      const r = await sys.rpc("agent", { sessionKey: key, agentId: "alice", message: `ping ${kind}` });
      expect(r.sessionKey).toBe(stored);
      expect((await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 })).reply).toBe(`alice: ping ${kind}`);
      const rows = await tool(sys, "sessions_list", ALICE, { kinds: [kind] });
      expect(rows.sessions.map((x: { key: string }) => x.key)).toContain(stored);
    }
  });

  it("isolated cron runs get a fresh sessionId per run and keep the session's overrides", async () => {
    const a = await sys.rpc("agent", {
      sessionKey: "cron:digest",
      agentId: "alice",
      message: "run 1",
      sessionTarget: "isolated",
    });
    await sys.rpc("agent.wait", { runId: a.runId, timeoutMs: 10_000 });
    await sys.rpc("sessions.patch", { key: a.sessionKey, model: "claude-opus-4" });
    const b = await sys.rpc("agent", {
      sessionKey: "cron:digest",
      agentId: "alice",
      message: "run 2",
      sessionTarget: "isolated",
    });
    await sys.rpc("agent.wait", { runId: b.runId, timeoutMs: 10_000 });
    expect(b.sessionId).not.toBe(a.sessionId);
    expect((await transcript(sys, b.sessionKey)).map(textOf)).toEqual(["run 2", "alice: run 2"]);
    expect((await sys.svc.sessions.get(b.sessionKey))?.modelOverride).toBe("claude-opus-4");
    // Not isolated: the same session goes on.
    const c = await sys.rpc("agent", { sessionKey: "cron:digest", agentId: "alice", message: "run 3" });
    expect(c.sessionId).toBe(b.sessionId);
  });

  it("system events never reset a session, even a stale one", async () => {
    const T = Date.now();
    const first = await sys.post("/v1/inbound", {
      channel: "idlechan",
      chatType: "dm",
      from: "hb",
      text: "hello",
      timestamp: T,
      agentId: "alice",
    });
    await sys.rpc("agent.wait", { runId: first.body.runId, timeoutMs: 10_000 });
    const key = first.body.sessionKey as string;
    // Each event comes hours after the last activity (idle window 30 min): stale, yet no reset,
    // and not even a reset trigger in its text starts a new session.
    let at = T;
    const before: { id: string }[] = await deliveries(sys, key);
    for (const channel of ["heartbeat", "cron-event", "exec-event"]) {
      at += 2 * 3_600_000;
      const ev = await sys.post("/v1/inbound", {
        channel,
        chatType: "dm",
        from: "hb",
        text: channel === "exec-event" ? "/new tick" : "tick",
        timestamp: at,
        agentId: "alice",
      });
      expect(ev.body.sessionKey).toBe(key);
      expect(ev.status).toBe(202);
      expect(ev.body.isNewSession, channel).toBe(false);
      expect(ev.body.resetReason).toBeUndefined();
      await sys.rpc("agent.wait", { runId: ev.body.runId, timeoutMs: 10_000 });
    }
    // Nor do they become the session's route: its replies still go where the person wrote from.
    expect(await sys.svc.sessions.get(key)).toMatchObject({
      channel: "idlechan",
      lastChannel: "idlechan",
      lastTo: "hb",
      deliveryContext: { channel: "idlechan", to: "hb" },
    });
    const replies = (await deliveries(sys, key)).filter((d: { id: string }) => before.every((b) => b.id !== d.id));
    expect(replies.map((d: { channel: string; to: string }) => `${d.channel}:${d.to}`)).toEqual(
      Array(3).fill("idlechan:hb"),
    );
  });
});

describe("POST /tools/invoke (OpenClaw's HTTP tool door)", () => {
  it("answers { ok, result: { details } } like OpenClaw; main is the default caller", async () => {
    const r = await sys.post("/tools/invoke", { tool: "sessions_list", args: { limit: 5 } });
    expect(r.status).toBe(200);
    expect(r.body.ok).toBe(true);
    expect(r.body.result.details.count).toBe(r.body.result.details.sessions.length);
    expect(JSON.parse(r.body.result.content[0].text)).toEqual(r.body.result.details);
    const asBob = await sys.post("/tools/invoke", {
      tool: "sessions_history",
      sessionKey: BOB,
      args: { sessionKey: "current", limit: 1 },
      dryRun: false,
    });
    expect(asBob.body.result.details).toMatchObject({ sessionKey: "main" });
    // A tool-level refusal is still a result, as in OpenClaw.
    const refused = await sys.post("/tools/invoke", {
      tool: "sessions_send",
      sessionKey: ALICE,
      args: { sessionKey: "agent:bob:slack:channel:c9:thread:1", message: "x" },
    });
    expect(refused.status).toBe(200);
    expect(refused.body.result.details).toMatchObject({ status: "error", error: THREAD_ERROR });
  });

  it("404 for an unknown tool, 400 for a bad request, 405 for other methods", async () => {
    expect((await sys.post("/tools/invoke", { tool: "exec", args: {} })).status).toBe(404);
    // Known, but outside this deployment's tool policy: not available either.
    expect((await sys.post("/tools/invoke", { tool: "sessions_spawn", args: { task: "x" } })).status).toBe(404);
    const bad = await sys.post("/tools/invoke", { args: {} });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ ok: false, error: { type: "invalid_request" } });
    const badArgs = await sys.post("/tools/invoke", { tool: "sessions_list", sessionKey: "agent::broken", args: {} });
    expect(badArgs.status).toBe(400);
    expect(badArgs.body.ok).toBe(false);
    // A caller key with an unsafe character: this door's own error shape, { type, message }.
    const unsafeCaller = await sys.post("/tools/invoke", {
      tool: "sessions_list",
      sessionKey: "agent:main:\u202eevil",
    });
    expect(unsafeCaller.status).toBe(400);
    expect(unsafeCaller.body).toEqual({
      ok: false,
      error: { type: "invalid_request", message: expect.stringContaining("U+202E") },
    });
    expect((await sys.get("/tools/invoke")).status).toBe(405);
  });
});
