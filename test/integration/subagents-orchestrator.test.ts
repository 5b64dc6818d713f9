/**
 * An orchestrator's report waits for its own sub-agents (OpenClaw defers its announce while
 * descendants are pending). Its run may end at once (it spawned and yielded); its leaves'
 * completions arrive in its session as turns, and its answer to the last of them is what its
 * requester hears. Before, it was announced the moment it yielded, with nothing to say, and
 * what its leaves led to never reached the top-level requester (nor could, once `cleanup:
 * "delete"` had removed its session).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, queuesQuiet, textOf, tool, toolsConfig, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

const BOSS = "agent:boss:main";
let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      agents: {
        defaults: { subagents: { maxChildrenPerAgent: 20, archiveAfterMinutes: 0 } },
        list: [
          scriptAgent(
            "boss",
            [
              { when: { regex: "Subagent completion event[\\s\\S]*leaf-b" }, reply: "ORCH: saw B" },
              { when: { regex: "Subagent completion event[\\s\\S]*leaf-a" }, reply: "ORCH: saw A" },
              { when: { step: "announce", regex: "Subagent completion event[\\s\\S]*stepper" }, reply: "STEP-SEEN" },
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              {
                when: { contains: "orchestrate two" },
                tools: [
                  { name: "sessions_spawn", args: { task: "leaf a work", label: "leaf-a" } },
                  { name: "sessions_spawn", args: { task: "leaf b work", label: "leaf-b" } },
                  { name: "sessions_yield", args: {} },
                ],
                reply: "unsaid",
              },
              {
                when: { contains: "orchestrate slow" },
                tools: [
                  { name: "sessions_spawn", args: { task: "slow leaf work", label: "slowpoke" } },
                  { name: "sessions_yield", args: {} },
                ],
                reply: "unsaid",
              },
              { when: { contains: "stepper work" }, reply: "stepped" },
              { when: { contains: "leaf a work" }, delayMs: 200, reply: "RESULT-A" },
              { when: { contains: "leaf b work" }, delayMs: 900, reply: "RESULT-B" },
              { when: { contains: "slow leaf work" }, delayMs: 8000, reply: "too late" },
              { reply: "boss: {{text}}" },
            ],
            { default: true, subagents: { maxSpawnDepth: 2 } },
          ),
        ],
      },
    }),
  );
  await chat(sys, "boss", "1", "hello boss");
});
afterAll(async () => {
  await sys?.close();
});

describe("an orchestrator that yields to its sub-agents", () => {
  it("reports once all of them are announced, with its answer to the last; cleanup delete waits too", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate two", label: "orch", cleanup: "delete" });
    // Its own run is over at once; its report is held.
    await settle(async () => (await registry(sys).get(res.runId))?.announce === "deferred", {
      what: "the orchestrator's announce deferred",
    });
    const orch = await announced(sys, res.runId);
    expect(orch).toMatchObject({ announce: "delivered", frozenResult: "ORCH: saw B" });
    const reports = (await announceDeliveries(sys, BOSS)).filter((d) => d.message.includes(res.childSessionKey));
    expect(reports).toHaveLength(1);
    expect(reports[0].message).toContain("ORCH: saw B");
    await queuesQuiet(sys);
    // Both leaves were announced into the orchestrator, which is removed only after its report.
    expect(await sys.svc.sessions.get(res.childSessionKey)).toBeNull();
    expect(await registry(sys).activeCount(BOSS)).toBe(0);
    expect(await registry(sys).activeCount(res.childSessionKey)).toBe(0);
  });

  it("a kill of an orchestrator waiting for its leaf kills both and frees the requester's slot", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate slow", label: "orch2" });
    await settle(async () => (await registry(sys).get(res.runId))?.announce === "deferred", {
      what: "the orchestrator's announce deferred",
    });
    const kill = await tool(sys, "subagents", BOSS, { action: "kill", target: "orch2" });
    expect(kill).toMatchObject({ status: "ok", killed: 1, cascadeKilled: 1 });
    const orch = await announced(sys, res.runId);
    expect(orch.announce).toBe("suppressed");
    await settle(async () => (await registry(sys).activeCount(BOSS)) === 0, { what: "the boss's slot freed" });
    expect((await announceDeliveries(sys, BOSS)).some((d) => d.message.includes(res.childSessionKey))).toBe(false);
  });
});

describe("a sub-agent's completion turn in its requester", () => {
  it("is an announce step (the script runtime's `step`), as a sessions_send announce is", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "stepper work", label: "stepper" });
    await announced(sys, res.runId);
    await settle(
      async () => (await transcript(sys, BOSS)).some((m) => m.role === "assistant" && textOf(m) === "STEP-SEEN"),
      {
        what: "the completion turn answered by the announce-step rule",
      },
    );
  });
});
