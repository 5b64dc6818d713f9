import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({
    // A drain out of retries is re-armed this soon (default 5 s): the test waits for that drain.
    workers: { rearmDrainDelayMs: 200 },
    tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    agents: {
      list: [
        { id: "main", runtime: { kind: "echo" } },
        {
          id: "bob",
          runtime: {
            kind: "script",
            rules: [{ when: { contains: "doomed" }, delayMs: 1500, fail: "boom" }, { reply: "bob: {{text}}" }],
          },
        },
      ],
    },
  });
});
afterAll(async () => {
  await sys?.close();
});

describe("nothing is stranded", () => {
  it("a sessions_send whose run fails after the caller stopped waiting still tells the requester", async () => {
    await sys.rpc("agent", { sessionKey: "main", message: "hello" }); // the requester session exists
    const res = await sys.post("/v1/tools/sessions_send", {
      sessionKey: "agent:main:main",
      args: { sessionKey: "agent:bob:main", message: "doomed request", timeoutSeconds: 1 },
    });
    expect(res.body).toMatchObject({ status: "timeout" });
    const history = await settle(
      async () => {
        const h = await sys.rpc("chat.history", { sessionKey: "main" });
        return h.messages.some((m: { content: unknown }) =>
          JSON.stringify(m.content).includes("ended with status error: boom"),
        )
          ? h
          : null;
      },
      { what: "the requester told that the send ended with error: boom", timeoutMs: 10_000 },
    );
    expect(history.messages.length).toBeGreaterThan(2);
    // The failed step ended the flow: no announce ran in bob's session.
    const bob = await sys.rpc("chat.history", { sessionKey: "agent:bob:main" });
    expect(JSON.stringify(bob.messages)).not.toContain("Agent-to-agent announce step.");
  });

  it("a turn whose drain job ran out of retries is drained again, not left in the inbox", async () => {
    const key = "agent:main:stranded";
    await sys.rpc("agent", { sessionKey: key, message: "first" });
    await settle(async () => !(await sys.svc.inbox.hasInflight(key)) && (await sys.svc.inbox.depth(key)) === 0, {
      what: "the first turn done (inbox and in-flight empty)",
    });
    const entry = (await sys.rpc("sessions.resolve", { key })).entry;
    // Hold the session lease so the drain below cannot acquire it; with its wait budget already
    // spent and one attempt, it fails for good, as a drain that exhausted its retries would.
    // The first run's drain frees its in-flight slot a moment before it releases the lease.
    const held = await settle(
      async () => {
        const r = await sys.svc.leases.tryAcquire(key);
        return r.acquired ? r : null;
      },
      { what: "the session lease, free once the first turn's drain let go", timeoutMs: 10_000 },
    );
    const runId = "00000000-0000-4000-a000-000000000001";
    await sys.svc.inbox.push({
      runId,
      sessionKey: key,
      agentId: "main",
      sessionId: entry.sessionId,
      text: "stranded",
      step: "turn",
      provenance: "user",
      messageTs: Date.now(),
      enqueuedAt: Date.now(),
    });
    const job = await sys.svc.queues.runs.add("drain", { sessionKey: key, leaseWaits: 1_000_000 }, { attempts: 1 });
    await settle(async () => (await job.getState()) === "failed", {
      what: "the drain job failed for good",
      timeoutMs: 10_000,
    });
    expect((await sys.svc.runs.get(runId))?.status).toBe("queued");
    if (held!.acquired) await held!.lease.release();
    // No new message arrives: only the re-armed drain can run the turn.
    const waited = await sys.rpc("agent.wait", { runId, timeoutMs: 15_000 });
    expect(waited).toMatchObject({ status: "ok", reply: "echo: stranded" });
  });
});
