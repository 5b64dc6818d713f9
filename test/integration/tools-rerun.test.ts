/**
 * Session tools called again by a re-run of their turn (its worker was killed, or it was handed
 * back at shutdown). The re-run's tool calls have the same calling run and call numbers as the
 * first attempt's: the same call must land on what the first attempt started, and a different
 * call must not. Each test calls the tool runtime twice with one calling runId, as the two
 * attempts of that turn would (src/tools/call-ids.ts).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, toolsConfig, transcript, textOf } from "../fixtures/tools-support.js";
import { announced, registry } from "../fixtures/subagents-support.js";
import { pace, settle } from "../helpers/settle.js";
import { createToolRuntime } from "../../src/tools/tool-runtime.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
      agents: {
        defaults: { subagents: { maxChildrenPerAgent: 1, archiveAfterMinutes: 0 } },
        list: [
          scriptAgent("main", [{ reply: "NO_REPLY" }], { default: true, subagents: { allowAgents: ["researcher"] } }),
          scriptAgent("researcher", [
            { when: { contains: "hang" }, delayMs: 20_000, reply: "never" },
            { when: { contains: "steady" }, delayMs: 4000, reply: "steady result" },
            { reply: "researcher: {{text}}" },
          ]),
          scriptAgent("bob", [{ when: { step: "announce" }, reply: "ANNOUNCE_SKIP" }, { reply: "bob: {{text}}" }]),
          scriptAgent("carol", [{ when: { step: "announce" }, reply: "ANNOUNCE_SKIP" }, { reply: "carol: {{text}}" }]),
        ],
      },
    }),
  );
  await chat(sys, "main", "1", "hello");
  await chat(sys, "bob", "2", "hi bob");
  await chat(sys, "carol", "3", "hi carol");
});

afterAll(async () => {
  await sys?.close();
});

/** One attempt of the turn `runId` of session `sessionKey`: a tool invoker numbering calls from 0. */
function attempt(sessionKey: string, runId: string) {
  const agentId = sessionKey.split(":")[1]!;
  const invoker = createToolRuntime(sys.svc).invokerFor({ sessionKey, agentId, runId, sandboxed: false, hop: 0 });
  return {
    call: async (name: string, args: Record<string, unknown>): Promise<any> => await invoker.call(name, args),
  };
}

describe("a re-run of the turn that called the tool", () => {
  it("subagents steer: finds its steer done instead of replacing the run it started by itself", async () => {
    const requester = "agent:main:steerer";
    const spawned = await attempt(requester, randomUUID()).call("sessions_spawn", {
      task: "hang on this",
      agentId: "researcher",
      label: "steerable",
    });
    expect(spawned).toMatchObject({ status: "accepted" });
    const turn = randomUUID();
    const steer = { action: "steer", target: "steerable", message: "steady: a new direction" };
    const first = await attempt(requester, turn).call("subagents", steer);
    expect(first).toMatchObject({ status: "accepted", text: "steered steerable." });
    // The re-run comes after the steer rate limit (2 s), as after a lease TTL, while the run the
    // first attempt started still runs: the target now resolves to that run.
    await pace(2_100, "past the steer rate limit, the steered run still running");
    expect((await registry(sys).get(first.runId))?.status).toBe("running");
    const again = await attempt(requester, turn).call("subagents", steer);
    expect(again).toEqual(first);
    const run = await registry(sys).get(first.runId);
    expect(run?.replacedBy).toBeUndefined();
    expect(run?.suppressAnnounce).toBeUndefined();
    const list = await attempt(requester, randomUUID()).call("subagents", { action: "list" });
    expect(list).toMatchObject({ total: 1 });
    // The steered run finishes and is announced, once.
    expect(await announced(sys, first.runId)).toMatchObject({ status: "ok" });
    expect((await sys.svc.runs.get(first.runId))?.reply).toBe("steady result");
    // A re-run at once answers the same, not "rate limited".
    expect(await attempt(requester, turn).call("subagents", steer)).toEqual(first);
  });

  it("sessions_spawn at the active-children limit: finds its own child instead of being refused by it", async () => {
    const requester = "agent:main:spawner";
    const turn = randomUUID();
    const task = { task: "hang here", agentId: "researcher" };
    const first = await attempt(requester, turn).call("sessions_spawn", task);
    expect(first).toMatchObject({ status: "accepted" });
    const again = await attempt(requester, turn).call("sessions_spawn", task);
    expect(again).toMatchObject({ status: "accepted", runId: first.runId, childSessionKey: first.childSessionKey });
    expect(await registry(sys).activeCount(requester)).toBe(1);
    // Any other spawn is still held to the limit (1), also a different one at the same call number.
    const other = await attempt(requester, turn).call("sessions_spawn", {
      task: "something else",
      agentId: "researcher",
    });
    expect(other).toMatchObject({ status: "forbidden" });
    expect(String(other.error)).toMatch(/max active children/);
    await attempt(requester, randomUUID()).call("subagents", { action: "kill", target: "all" });
  });

  it("sessions_send: the same send waits for the first attempt's run; another is sent, not answered so", async () => {
    const requester = "agent:main:sender";
    const turn = randomUUID();
    const toBob = { sessionKey: "agent:bob:main", message: "question for bob", timeoutSeconds: 0 };
    const first = await attempt(requester, turn).call("sessions_send", toBob);
    expect(first).toMatchObject({ status: "accepted" });
    const same = await attempt(requester, turn).call("sessions_send", { ...toBob, timeoutSeconds: 10 });
    expect(same).toMatchObject({ status: "ok", runId: first.runId, reply: "bob: question for bob" });

    // The re-run's model sends something else at that call number: it goes out, to carol.
    const toCarol = await attempt(requester, turn).call("sessions_send", {
      sessionKey: "agent:carol:main",
      message: "question for carol",
      timeoutSeconds: 10,
    });
    expect(toCarol).toMatchObject({ status: "ok", reply: "carol: question for carol" });
    expect(toCarol.runId).not.toBe(first.runId);
    const carolHeard = await settle(
      async () => (await transcript(sys, "agent:carol:main")).some((m) => textOf(m) === "question for carol"),
      { what: "carol's transcript has the message sent to her" },
    );
    expect(carolHeard).toBe(true);
    // Bob heard his question once.
    const bobHeard = (await transcript(sys, "agent:bob:main")).filter((m) => textOf(m) === "question for bob");
    expect(bobHeard).toHaveLength(1);
  });
});
