import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({
    agents: {
      list: [
        {
          id: "main",
          runtime: {
            kind: "script",
            rules: [{ when: { contains: "slow" }, delayMs: 5000, reply: "too late" }, { reply: "quick: {{text}}" }],
          },
        },
      ],
    },
  });
});
afterAll(async () => {
  await sys?.close();
});

describe("runTimeoutSeconds aborts a run", () => {
  it("a run over its time limit ends as timeout, promptly, and the session carries on", async () => {
    const started = Date.now();
    const { runId } = await sys.rpc("agent", { sessionKey: "main", message: "slow please", runTimeoutSeconds: 1 });
    const waited = await sys.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    const elapsed = Date.now() - started;
    expect(waited).toMatchObject({ runId, status: "timeout", error: "run timed out" });
    expect(waited.reply).toBeUndefined();
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(4000);

    const entry = (await sys.rpc("sessions.resolve", { key: "main" })).entry;
    expect(entry.abortedLastRun).toBe(true);
    const history = await sys.rpc("chat.history", { sessionKey: "main" });
    const last = history.messages[history.messages.length - 1];
    expect(last).toMatchObject({ role: "assistant", stopReason: "aborted" });
    expect(JSON.stringify(history.messages)).not.toContain("too late");

    const next = await sys.rpc("agent", { sessionKey: "main", message: "next" });
    expect(await sys.rpc("agent.wait", { runId: next.runId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "quick: next",
    });
  });
});
