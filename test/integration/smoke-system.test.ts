import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem();
});
afterAll(async () => {
  await sys?.close();
});

describe("gateway + workers in one process", () => {
  it("inbound message runs through the echo runtime and agent.wait returns the reply", async () => {
    const res = await sys.post("/v1/inbound", { channel: "telegram", chatType: "dm", from: "123", text: "hello" });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ ok: true, agentId: "main", sessionKey: "agent:main:main", isNewSession: true });
    const waited = await sys.rpc("agent.wait", { runId: res.body.runId, timeoutMs: 10_000 });
    expect(waited).toMatchObject({ runId: res.body.runId, status: "ok", reply: "echo: hello" });
    const run = await sys.get(`/v1/runs/${res.body.runId}`);
    expect(run.body).toMatchObject({ status: "ok", reply: "echo: hello", sessionKey: "agent:main:main" });
    expect(run.body.startedAt).toBeLessThanOrEqual(run.body.endedAt);
    const hist = await sys.rpc("chat.history", { sessionKey: "main" });
    expect(hist.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
  });
});
