/**
 * An orchestrator's report waits for its own sub-agents (OpenClaw defers its announce while
 * descendants are pending). Its run may end at once (it spawned and yielded); its leaves'
 * completions arrive in its session as turns, and its answer to the last of them is what its
 * requester hears. Before, it was announced the moment it yielded, with nothing to say, and
 * what its leaves led to never reached the top-level requester (nor could, once `cleanup:
 * "delete"` had removed its session).
 *
 * What it reports is its latest answer, also when the last of its sub-agents to end queues no
 * completion turn (silent, killed), and the report's stats cover all its turns.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, queuesQuiet, textOf, tool, toolsConfig, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

const BOSS = "agent:boss:main";
/** The orchestrator's own (yielding) turn's usage, and each of its completion turns'. */
const YIELD_USAGE = { input: 10, output: 1 };
const TURN_USAGE = { input: 100, output: 20 };
let sys: TestSystem;

/** The orchestrator's report as posted to the boss's chat (exactly one). */
async function reportOf(childKey: string): Promise<string> {
  const reports = (await announceDeliveries(sys, BOSS)).filter((d) => d.message.includes(childKey));
  expect(reports).toHaveLength(1);
  return reports[0].message;
}

/** The orchestrator's answers in its own session, in order. */
async function answersOf(childKey: string): Promise<string[]> {
  return (await transcript(sys, childKey))
    .filter((m) => m.role === "assistant" && textOf(m).startsWith("ORCH"))
    .map((m) => textOf(m));
}

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      agents: {
        defaults: { subagents: { maxChildrenPerAgent: 20, archiveAfterMinutes: 0 } },
        list: [
          scriptAgent(
            "boss",
            [
              { when: { regex: "Subagent completion event[\\s\\S]*leaf-b" }, reply: "ORCH: saw B", usage: TURN_USAGE },
              { when: { regex: "Subagent completion event[\\s\\S]*leaf-a" }, reply: "ORCH: saw A", usage: TURN_USAGE },
              {
                when: { regex: "Subagent completion event[\\s\\S]*loudleaf" },
                reply: "ORCH: loud said LOUD",
                usage: TURN_USAGE,
              },
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
                usage: YIELD_USAGE,
              },
              {
                // The quiet leaf ends last, silent: no completion turn comes after the loud one's.
                when: { regex: "orchestrate (quiet|stuck)" },
                tools: [
                  { name: "sessions_spawn", args: { task: "loud leaf work", label: "loudleaf" } },
                  { name: "sessions_spawn", args: { task: "{{1}} leaf work", label: "{{1}}leaf" } },
                  { name: "sessions_yield", args: {} },
                ],
                usage: YIELD_USAGE,
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
              { when: { contains: "loud leaf work" }, delayMs: 100, reply: "LOUD" },
              { when: { contains: "quiet leaf work" }, delayMs: 800, reply: "NO_REPLY" },
              { when: { contains: "stuck leaf work" }, delayMs: 8000, reply: "too late" },
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
    const report = await reportOf(res.childSessionKey);
    expect(report).toContain("ORCH: saw B");
    // Its stats cover the whole of it: from its own run's start (leaf b ends 900 ms after it),
    // with the tokens of that run and of both completion turns, not only the last turn's.
    const own = (await sys.get(`/v1/runs/${res.runId}`)).body;
    expect(orch).toMatchObject({ startedAt: own.startedAt, usageInput: 210, usageOutput: 41 });
    expect(orch.endedAt! - orch.startedAt!).toBeGreaterThanOrEqual(900);
    expect(report).toContain("tokens 251 (in 210 / out 41)");
    await queuesQuiet(sys);
    // Both leaves were announced into the orchestrator, which is removed only after its report.
    expect(await sys.svc.sessions.get(res.childSessionKey)).toBeNull();
    expect(await registry(sys).activeCount(BOSS)).toBe(0);
    expect(await registry(sys).activeCount(res.childSessionKey)).toBe(0);
  });

  it("whose last leaf ends silent reports its answer to the earlier completion, not (no output)", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate quiet", label: "orch-q" });
    const orch = await announced(sys, res.runId);
    expect(orch).toMatchObject({ announce: "delivered", frozenResult: "ORCH: loud said LOUD" });
    expect(await reportOf(res.childSessionKey)).toContain("ORCH: loud said LOUD");
    expect(orch).toMatchObject({ usageInput: 110, usageOutput: 21 });
    await queuesQuiet(sys);
    // The quiet leaf's end was its last event (it queued no completion turn) and came after that answer.
    const [quiet] = (await registry(sys).forRequester(res.childSessionKey)).filter((r) => r.label === "quietleaf");
    expect(quiet).toMatchObject({ announce: "skipped" });
    expect(await answersOf(res.childSessionKey)).toEqual(["ORCH: loud said LOUD"]);
  });

  it("whose last leaf is killed reports its answer to the earlier completion", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate stuck", label: "orch-k" });
    await settle(async () => (await answersOf(res.childSessionKey)).length === 1, {
      what: "the orchestrator's answer to the loud leaf",
    });
    // Killed by the orchestrator's own controls (it is the stuck leaf's requester).
    expect(await tool(sys, "subagents", res.childSessionKey, { action: "kill", target: "stuckleaf" })).toMatchObject({
      status: "ok",
      killed: 1,
    });
    const orch = await announced(sys, res.runId);
    expect(orch).toMatchObject({ announce: "delivered", frozenResult: "ORCH: loud said LOUD" });
    expect(await reportOf(res.childSessionKey)).toContain("ORCH: loud said LOUD");
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
