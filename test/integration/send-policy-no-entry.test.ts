/**
 * A request refused by the send policy leaves nothing behind: the `agent` RPC and sessions_send
 * check the policy before a missing session is created (as POST /v1/inbound does), so any number
 * of refused calls to new session keys creates no session entries. An allowed call still creates
 * its session.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, tool, toolsConfig } from "../fixtures/tools-support.js";

const N = 8;
let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      // keyPrefix matches the key without `agent:<id>:` too.
      session: { sendPolicy: { rules: [{ action: "deny", match: { keyPrefix: "blocked-" } }] } },
      agents: {
        list: [
          scriptAgent("alice", [{ reply: "alice: {{text}}" }], { default: true }),
          scriptAgent("bob", [{ reply: "bob: {{text}}" }]),
        ],
      },
    }),
  );
  // The sessions_send caller exists (a person wrote to it).
  await chat(sys, "alice", "1", "hi alice");
});

afterAll(async () => {
  await sys?.close();
});

describe("a send refused by policy creates no session", () => {
  it("agent RPC: refused calls to new keys answer send_blocked and leave no entries", async () => {
    const before = await sys.svc.sessions.count();
    for (let i = 0; i < N; i++) {
      const res = await sys.post("/v1/rpc/agent", { sessionKey: `blocked-rpc-${i}`, message: "x" });
      expect(res.body.error.code).toBe("send_blocked");
      expect(await sys.svc.sessions.get(`agent:alice:blocked-rpc-${i}`)).toBeNull();
    }
    expect(await sys.svc.sessions.count()).toBe(before);
    // An allowed key is created as before.
    const ok = await sys.rpc("agent", { sessionKey: "open-rpc", message: "x" });
    expect(ok.sessionKey).toBe("agent:alice:open-rpc");
    expect(await sys.svc.sessions.get("agent:alice:open-rpc")).not.toBeNull();
  });

  it("sessions_send: refused sends to new keys answer an error and leave no entries", async () => {
    const before = await sys.svc.sessions.count();
    for (let i = 0; i < N; i++) {
      const res = await tool(sys, "sessions_send", "agent:alice:main", {
        sessionKey: `agent:bob:blocked-tool-${i}`,
        message: "are you there",
        timeoutSeconds: 0,
      });
      expect(res).toMatchObject({ status: "error", error: "send blocked by session policy" });
      expect(await sys.svc.sessions.get(`agent:bob:blocked-tool-${i}`)).toBeNull();
    }
    expect(await sys.svc.sessions.count()).toBe(before);
    const ok = await tool(sys, "sessions_send", "agent:alice:main", {
      sessionKey: "agent:bob:open-tool",
      message: "hello",
      timeoutSeconds: 0,
    });
    expect(ok).toMatchObject({ status: "accepted" });
    expect(await sys.svc.sessions.get("agent:bob:open-tool")).not.toBeNull();
  });

  it("an existing session's own deny override still refuses both", async () => {
    await sys.rpc("agent", { sessionKey: "muted", message: "x" });
    await sys.rpc("sessions.patch", { key: "agent:alice:muted", sendPolicy: "deny" });
    const res = await sys.post("/v1/rpc/agent", { sessionKey: "muted", message: "y" });
    expect(res.body.error.code).toBe("send_blocked");
    const sent = await tool(sys, "sessions_send", "agent:bob:main", { sessionKey: "agent:alice:muted", message: "z" });
    expect(sent).toMatchObject({ status: "error", error: "send blocked by session policy" });
  });
});
