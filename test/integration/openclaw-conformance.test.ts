/**
 * OpenClaw conformance and owner security, end to end over HTTP: what a user moving over from
 * OpenClaw relies on. Owner-only `/send`, one sanitiser on every hand-off path (sessions_send
 * reply, reply-back turns, announce and chat deliveries), thread keys refused as sessions_send
 * targets, inter-session input marked and traced, secrets masked before they are stored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, until, type TestSystem } from "../helpers/system.js";
import { chat, deliveries, isInterSessionUser, scriptAgent, settle, textOf, tool, toolsConfig, transcript, type Msg } from "../fixtures/tools-support.js";

const ALICE = "agent:alice:main";
const BOB = "agent:bob:main";
const THREAD_ERROR = "sessions_send cannot target a thread session for inter-agent coordination. Use the parent channel session key instead.";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      commands: { ownerAllowFrom: ["tg:boss", "*"] },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      session: { agentToAgent: { maxPingPongTurns: 1 } },
      agents: {
        list: [
          scriptAgent(
            "alice",
            [
              { when: { step: "reply" }, reply: "REPLY_SKIP" },
              { reply: "alice: {{text}}" },
            ],
            { default: true },
          ),
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
  const group = (from: string, text: string) => ({ channel: "tg", chatType: "group", from, groupId: "ops-room", groupSubject: "Ops", text, agentId: "alice" });
  const key = "agent:alice:tg:group:ops-room";

  it("a non-owner's /send changes nothing and gets a refusal; a wildcard entry makes nobody an owner", async () => {
    const res = await sys.post("/v1/inbound", group("mallory", "/send off"));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ command: "send", refused: "not_owner" });
    expect(res.body.sendPolicy).toBeUndefined();
    expect((await sys.svc.sessions.get(key))?.sendPolicy).toBeUndefined();
    const refusal = await until(async () => (await deliveries(sys, key)).find((d) => d.message.includes("Only an owner")));
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
    await settle(sys);
    // The reply-back turn in the requester got the cleaned reply as its text.
    const replyBack = (await transcript(sys, ALICE)).slice(before).filter(isInterSessionUser);
    expect(replyBack.map(textOf)).toEqual(["Bob answer"]);
    // The announce post to Bob's channel is cleaned too.
    const announce = (await deliveries(sys, BOB)).find((d) => d.kind === "announce" || d.message.includes("Bob is done"));
    expect(announce?.message).toBe("Bob is done.");
    // The target's own transcript keeps what its model wrote.
    expect((await transcript(sys, BOB)).map(textOf).join("\n")).toContain("<thinking>the user wants X");
  });

  it("a chat reply delivered to the channel is cleaned as well", async () => {
    const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "99", text: "what now?", agentId: "bob" });
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    const d = await until(async () => (await deliveries(sys, BOB)).find((x) => x.id === `reply-${r.body.runId}`));
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
  it("reaches the receiving runtime marked isUser=false, and its transcript line names source session and run", async () => {
    const res = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "mark? please", timeoutSeconds: 10 });
    expect(res.status).toBe("ok");
    expect(res.reply).toMatch(/^\[Inter-session message\] sourceSession=agent:alice:main .*sourceTool=sessions_send.* isUser=false\nmark\? please$/);
    await settle(sys);
    const bobLines = await transcript(sys, BOB);
    const received = bobLines.find((m: Msg) => m.role === "user" && textOf(m) === "mark? please");
    expect(received?.provenance).toMatchObject({ kind: "inter_session", sourceSessionKey: ALICE, sourceTool: "sessions_send" });
    // The reply-back into Alice names Bob's run that produced it.
    const back = (await transcript(sys, ALICE)).filter(isInterSessionUser).at(-1)!;
    expect(back.provenance).toMatchObject({ kind: "inter_session", sourceSessionKey: BOB, sourceRunId: res.runId });
  });
});

describe("secrets are not persisted", () => {
  it("the transcript stores the masked key while the turn itself saw the original", async () => {
    const secret = "sk-proj-Abcdefghijklmnop1234567890x5jK0";
    const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "99", text: `my key ${secret}`, agentId: "bob" });
    const w = await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    expect(w.reply).toBe(`noted my key ${secret}`); // the runtime got the real text
    const stored = JSON.stringify(await transcript(sys, BOB));
    expect(stored).not.toContain(secret);
    expect(stored).toContain("my key sk-pro…5jK0");
    expect(stored).toContain("noted my key sk-pro…5jK0");
  });
});
