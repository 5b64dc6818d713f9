/**
 * subagents kill and steer at the edges of a run's life, on real Redis with script runtimes: a
 * run that has finished but whose announce job has not run yet is finished (its result is
 * announced, not thrown away); a killed run cannot be steered; a steered run starts clean; a
 * steer stops only the run it replaces (a grandchild's completion queued in the child stays);
 * a steer cut short by a crash is completed by the re-run of its turn; a spawn re-run does not
 * bring back a child that cleanup "delete" removed.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { startPeer } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp, runOk } from "../helpers/api.js";
import { chat, scriptAgent, tool, toolsConfig, transcript, textOf } from "../fixtures/tools-support.js";
import { announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { pace } from "../helpers/settle.js";
import type { QueueName } from "../../src/queues/queue-names.js";
import { steeredRun, subagentsTool } from "../../src/tools/subagents-tool.js";
import { sessionsSpawn } from "../../src/tools/sessions-spawn.js";
import { toolCallIds } from "../../src/tools/call-ids.js";
import type { ToolCaller } from "../../src/tools/tool-context.js";
import type { SubagentRun } from "../../src/subagents/registry.js";
import { childTaskMessage } from "../../src/subagents/spawn-policy.js";

const MAIN = "agent:main:main";
/** Every queue but `announce`: a finished child's announce job waits until announceWorker(). */
const NO_ANNOUNCE: QueueName[] = ["runs", "subagents", "delivery", "maintenance"];

afterEach(cleanUp);

async function deployment(queues?: QueueName[], subagents: Record<string, unknown> = {}): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0, ...subagents } },
        list: [
          scriptAgent(
            "main",
            [
              { when: { regex: "Subagent completion event[\\s\\S]*quickleaf" }, reply: "ORCH-QUICK-SUMMARY" },
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              {
                when: { contains: "fan out quick" },
                tools: [
                  { name: "sessions_spawn", args: { task: "compute", label: "quickleaf" } },
                  { name: "sessions_yield", args: {} },
                ],
                reply: "unsaid",
              },
              {
                when: { contains: "fan out medium" },
                tools: [
                  { name: "sessions_spawn", args: { task: "medium job", label: "mid" } },
                  { name: "sessions_yield", args: {} },
                ],
                reply: "unsaid",
              },
              { when: { contains: "medium job" }, delayMs: 1500, reply: "medium" },
              { when: { contains: "grandchild job" }, reply: "GRANDCHILD-RESULT-7" },
              { when: { contains: "long orchestration" }, delayMs: 8000, reply: "orch first run" },
              { when: { contains: "compute" }, reply: "IMPORTANT-RESULT" },
              { when: { contains: "hang" }, delayMs: 8000, reply: "late" },
              { reply: "main: {{text}}" },
            ],
            { default: true, subagents: { maxSpawnDepth: 2 } },
          ),
        ],
      },
    }),
    queues ? { gateway: true, workers: { queues } } : undefined,
  );
  await chat(sys, "main", "1", "hello");
  return sys;
}

async function announceWorker(sys: TestSystem): Promise<void> {
  const peer = await startPeer(sys.config, { workers: { queues: ["announce"] } });
  onCleanUp(() => peer.close());
}

async function running(sys: TestSystem, runId: string): Promise<void> {
  await settle(async () => (await sys.get(`/v1/runs/${runId}`)).body.status === "running", {
    what: `run ${runId} running`,
  });
}

/** A caller whose tool calls are numbered from 0 in the turn `runId` (as each attempt of it is). */
function turnCaller(runId: string): ToolCaller {
  let seq = 0;
  return { sessionKey: MAIN, agentId: "main", sandboxed: false, hop: 0, runId, nextCallSeq: () => seq++ };
}

/** What a steer registers for its new run (what a spawn registers). */
const steerRecord = (prev: SubagentRun, runId: string): SubagentRun => steeredRun(prev, runId, 1);

describe("subagents kill/steer of a run that finished before its announce ran", () => {
  it("kill answers 'already finished' and the result is still announced", async () => {
    const sys = await deployment(NO_ANNOUNCE);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "compute", label: "calc" });
    expect((await runOk(sys, res.runId)).reply).toBe("IMPORTANT-RESULT");
    // The registry learns the outcome in the announce job, which has not run.
    expect((await registry(sys).get(res.runId))?.status).toBe("running");
    const list = await tool(sys, "subagents", MAIN, { action: "list" });
    expect(list.active).toEqual([]);
    expect(list.recent[0]).toMatchObject({ label: "calc", status: "ok", announce: "pending" });
    // session_status agrees: nothing of it is running any more.
    expect((await tool(sys, "session_status", MAIN, {})).details.subagents).toEqual([]);

    const killed = await tool(sys, "subagents", MAIN, { action: "kill", target: "calc" });
    expect(killed).toMatchObject({ status: "done", runId: res.runId, text: "calc is already finished." });
    expect(await tool(sys, "subagents", MAIN, { action: "kill", target: "all" })).toMatchObject({
      status: "done",
      text: "no running subagents to kill.",
    });
    // The suppression itself refuses a run whose run record is terminal (one Lua step).
    expect(await registry(sys).suppressKilled(res.runId)).toBe("finished");
    expect((await registry(sys).get(res.runId))?.suppressAnnounce).toBeUndefined();

    await announceWorker(sys);
    expect(await announced(sys, res.runId)).toMatchObject({
      status: "ok",
      announce: "delivered",
      frozenResult: "IMPORTANT-RESULT",
    });
    const turns = await completionTurns(sys, MAIN);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("IMPORTANT-RESULT");
  });

  it("steer answers 'already finished', starts nothing, and the result is still announced", async () => {
    const sys = await deployment(NO_ANNOUNCE);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "compute", label: "calc" });
    await runOk(sys, res.runId);
    expect((await registry(sys).get(res.runId))?.status).toBe("running");

    const steered = await tool(sys, "subagents", MAIN, { action: "steer", target: "calc", message: "also do X" });
    expect(steered).toMatchObject({ status: "done", runId: res.runId, text: "calc is already finished." });
    const prev = (await registry(sys).get(res.runId))!;
    expect(prev.suppressAnnounce).toBeUndefined();
    expect(prev.replacedBy).toBeUndefined();
    // The replace itself refuses a run whose run record is terminal (one Lua step).
    expect(await registry(sys).replace(prev, steerRecord(prev, randomUUID()))).toBe("finished");
    expect(await registry(sys).forRequester(MAIN)).toHaveLength(1);

    await announceWorker(sys);
    expect(await announced(sys, res.runId)).toMatchObject({ status: "ok", announce: "delivered" });
    const turns = await completionTurns(sys, MAIN);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("IMPORTANT-RESULT");
  });
});

describe("subagents steer", () => {
  it("refuses a run that was killed (its suppression is not carried into a new run)", async () => {
    const sys = await deployment(NO_ANNOUNCE);
    const a = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "w" });
    await running(sys, a.runId);
    expect(await tool(sys, "subagents", MAIN, { action: "kill", target: "w" })).toMatchObject({
      status: "ok",
      text: "killed 1 subagent(s).",
    });
    const steered = await tool(sys, "subagents", MAIN, { action: "steer", target: "w", message: "redo it" });
    expect(steered).toMatchObject({ status: "done", runId: a.runId, text: "w is already finished." });
    const prev = (await registry(sys).get(a.runId))!;
    expect(prev).toMatchObject({ suppressAnnounce: "killed" });
    expect(prev.replacedBy).toBeUndefined();
    expect(await registry(sys).replace(prev, steerRecord(prev, randomUUID()))).toBe("stopped");
    expect(await registry(sys).forRequester(MAIN)).toHaveLength(1);
  });

  it("the new run's registry record holds only what a spawn registers", async () => {
    const sys = await deployment();
    const a = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "w" });
    await running(sys, a.runId);
    // Fields a record gets later (outcome, usage, announce state) must not reach the new run.
    await registry(sys).update(a.runId, { usageInput: 5, usageOutput: 7, error: "old", announceError: "old" });
    const steered = await tool(sys, "subagents", MAIN, { action: "steer", target: "w", message: "redo it" });
    expect(steered).toMatchObject({ status: "accepted", text: "steered w." });
    const next = (await registry(sys).get(steered.runId))!;
    expect(next).toMatchObject({ status: "running", announce: "pending", label: "w", replaces: a.runId });
    for (const f of ["usageInput", "usageOutput", "error", "announceError", "suppressAnnounce", "replacedBy"])
      expect(next, f).not.toHaveProperty(f);
    expect(await announced(sys, steered.runId)).toMatchObject({ status: "ok", announce: "delivered" });
  });

  it("stops only the replaced run: a grandchild's completion queued in the child stays and runs", async () => {
    const sys = await deployment();
    const o = await tool(sys, "sessions_spawn", MAIN, { task: "long orchestration", label: "orch" });
    await running(sys, o.runId);
    // O (an orchestrator) spawns G while O's run is busy: G's completion waits in O's inbox.
    const g = await tool(sys, "sessions_spawn", o.childSessionKey, { task: "grandchild job", label: "g" });
    expect(await announced(sys, g.runId)).toMatchObject({ status: "ok", announce: "delivered" });
    expect(await sys.svc.inbox.depth(o.childSessionKey)).toBe(1);
    expect((await sys.svc.runs.get(o.runId))?.status).toBe("running");

    const steered = await tool(sys, "subagents", MAIN, { action: "steer", target: "orch", message: "new direction" });
    expect(steered).toMatchObject({ status: "accepted", text: "steered orch." });
    expect(await announced(sys, o.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    expect(await announced(sys, steered.runId)).toMatchObject({ status: "ok", announce: "delivered" });
    const inO = await completionTurns(sys, o.childSessionKey);
    expect(inO).toHaveLength(1);
    expect(textOf(inO[0]!)).toContain("GRANDCHILD-RESULT-7");
    // In order: O's task, G's completion (queued first), the steer.
    const users = (await transcript(sys, o.childSessionKey)).filter((m) => m.role === "user").map(textOf);
    expect(users).toHaveLength(3);
    expect(users[1]).toContain(COMPLETION);
    expect(users[2]).toBe("new direction");
  });

  it("a re-run of a steer cut short after the replace stops the old run and queues the new one", async () => {
    const sys = await deployment();
    const sp = await tool(sys, "sessions_spawn", MAIN, { task: "hang please", label: "worker" });
    await running(sys, sp.runId);
    const R = randomUUID();
    const message = "a new plan";
    const prev = (await registry(sys).get(sp.runId))!;
    const runId = toolCallIds(turnCaller(R), "subagents.steer").id(prev.childSessionKey, message);
    // The first attempt of turn R got as far as the registry, then its worker died.
    expect(await registry(sys).replace(prev, steerRecord(prev, runId))).toBe("replaced");

    const again = await subagentsTool(sys.svc, turnCaller(R), { action: "steer", target: "worker", message });
    expect(again).toMatchObject({ status: "accepted", runId, text: "steered worker." });
    expect((await runOk(sys, runId, 10_000)).reply).toBe("main: a new plan");
    expect(await announced(sys, sp.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    expect(await announced(sys, runId)).toMatchObject({ status: "ok", announce: "delivered" });
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    // Once more: everything is done, nothing happens again.
    expect(await subagentsTool(sys.svc, turnCaller(R), { action: "steer", target: "worker", message })).toEqual(again);
    const turns = await completionTurns(sys, MAIN);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("main: a new plan");
  });
});

describe("a steer of a child whose turn is still queued", () => {
  it("carries the task the child never saw, then the guidance", async () => {
    // One sub-agent run at a time: the second child's turn waits behind the first's.
    const sys = await deployment(undefined, { maxConcurrent: 1 });
    const first = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "first" });
    await running(sys, first.runId);
    const second = await tool(sys, "sessions_spawn", MAIN, { task: "compute", label: "second" });
    expect((await sys.svc.runs.get(second.runId))?.status).toBe("queued");

    const steered = await tool(sys, "subagents", MAIN, {
      action: "steer",
      target: "second",
      message: "show your work",
    });
    expect(steered).toMatchObject({ status: "accepted", text: "steered second." });
    // The replaced run never began: dropped from the queue.
    const dropped = await sys.svc.runs.get(second.runId);
    expect(dropped?.status).toBe("killed");
    expect(dropped?.startedAt).toBeUndefined();
    // Let the second child run now.
    expect(await tool(sys, "subagents", MAIN, { action: "kill", target: "first" })).toMatchObject({ status: "ok" });
    expect(await announced(sys, steered.runId)).toMatchObject({
      status: "ok",
      announce: "delivered",
      frozenResult: "IMPORTANT-RESULT",
    });
    const users = (await transcript(sys, second.childSessionKey)).filter((m) => m.role === "user").map(textOf);
    expect(users).toEqual([`${childTaskMessage("compute", 1, 2)}\n\nshow your work`]);
  });
});

describe("sessions_spawn re-run", () => {
  it("does not recreate a child that cleanup 'delete' removed after its run", async () => {
    const sys = await deployment();
    const R = randomUUID();
    const args = { task: "compute quickly", cleanup: "delete" };
    const first = await sessionsSpawn(sys.svc, turnCaller(R), args);
    expect(first).toMatchObject({ status: "accepted" });
    const childKey = first.childSessionKey as string;
    expect(await announced(sys, first.runId as string)).toMatchObject({ status: "ok", announce: "delivered" });
    await settle(async () => (await sys.svc.sessions.get(childKey)) === null, { what: "the child deleted" });

    const again = await sessionsSpawn(sys.svc, turnCaller(R), args);
    expect(again).toEqual(first);
    await pace(500, "anything the re-run queued would have started");
    expect(await sys.svc.sessions.get(childKey)).toBeNull();
    expect(await sys.svc.sessions.childKeys(MAIN)).not.toContain(childKey);
    expect(await completionTurns(sys, MAIN)).toHaveLength(1);
  });
});

describe("a spawn made by a run that a kill stopped", () => {
  it("starts no child: the kill's cascade had listed the children before this one existed", async () => {
    const sys = await deployment();
    const callerRun = randomUUID();
    const caller: ToolCaller = { sessionKey: MAIN, agentId: "main", sandboxed: false, hop: 0, runId: callerRun };
    // The calling run as a kill leaves it: cancel asked (it may still be finishing its tool call).
    await sys.svc.redis.hset(sys.svc.keys.run(callerRun), { runId: callerRun, status: "running" });
    await sys.svc.redis.hset(sys.svc.keys.run(callerRun), "cancelRequested", "killed");
    const refused = await sessionsSpawn(sys.svc, caller, { task: "compute" });
    expect(refused).toMatchObject({ status: "forbidden", error: "The calling run was stopped: nothing was spawned." });
    expect(await sys.svc.sessions.get(refused.childSessionKey as string)).toBeNull();
    expect(await registry(sys).activeCount(MAIN)).toBe(0);

    // A run that has ended (killed) spawns nothing either; a live one does.
    await sys.svc.redis.hset(sys.svc.keys.run(callerRun), "status", "killed");
    expect((await sessionsSpawn(sys.svc, { ...caller }, { task: "compute" })).status).toBe("forbidden");
    const live = randomUUID();
    await sys.svc.redis.hset(sys.svc.keys.run(live), { runId: live, status: "running" });
    const ok = await sessionsSpawn(sys.svc, { ...caller, runId: live }, { task: "compute" });
    expect(ok.status).toBe("accepted");
    expect((await announced(sys, ok.runId as string)).frozenResult).toBe("IMPORTANT-RESULT");
  });
});

describe("an orchestrator whose leaf ended before its own announce job ran", () => {
  it("still reports its answer to the leaf's completion, not what it said before it yielded", async () => {
    const sys = await deployment(NO_ANNOUNCE);
    const o = await tool(sys, "sessions_spawn", MAIN, { task: "fan out quick", label: "fanner" });
    await runOk(sys, o.runId);
    const [leafKey] = await settle(
      async () => {
        const keys = await sys.svc.sessions.childKeys(o.childSessionKey);
        return keys.length ? keys : undefined;
      },
      { what: "the leaf spawned" },
    );
    const leafRun = (await registry(sys).currentRunOf(leafKey!))!;
    await runOk(sys, leafRun);
    // Both runs are over; neither announce job has run. Whatever order they run in now:
    await announceWorker(sys);
    expect(await announced(sys, o.runId)).toMatchObject({ announce: "delivered", frozenResult: "ORCH-QUICK-SUMMARY" });
    expect(await announced(sys, leafRun)).toMatchObject({ announce: "delivered", frozenResult: "IMPORTANT-RESULT" });
  });
});

describe("a kill of an orchestrator waiting for its report, its leaf's completion still queued", () => {
  it("ends it and frees its requester's slot (the dropped completion's claim does it)", async () => {
    const sys = await deployment();
    const o = await tool(sys, "sessions_spawn", MAIN, { task: "fan out medium", label: "waiting" });
    await settle(async () => (await registry(sys).get(o.runId))?.announce === "deferred", {
      what: "the orchestrator's report waiting for its leaf",
    });
    // Its session busy with a long turn, so the leaf's completion queues behind it.
    const busy = await enqueueTurn(sys.svc, {
      sessionKey: o.childSessionKey,
      agentId: "main",
      sessionId: (await sys.svc.sessions.get(o.childSessionKey))!.sessionId,
      text: "long orchestration",
      step: "turn",
      provenance: "inter_session",
    });
    await running(sys, busy.runId);
    await settle(
      async () =>
        (await completionTurns(sys, o.childSessionKey)).length === 0 &&
        (await sys.svc.inbox.depth(o.childSessionKey)) === 1,
      {
        what: "the leaf's completion queued in the orchestrator's session",
      },
    );
    const kill = await tool(sys, "subagents", MAIN, { action: "kill", target: "waiting" });
    expect(kill).toMatchObject({ status: "ok", killed: 1 });
    expect(await announced(sys, o.runId)).toMatchObject({ announce: "suppressed" });
    await settle(async () => (await registry(sys).activeCount(MAIN)) === 0, { what: "the requester's slot freed" });
  });
});

describe("a steer whose first attempt took the rate-limit window, then died", () => {
  it("the re-run of the steering turn is not refused by its own window", async () => {
    const sys = await deployment();
    const sp = await tool(sys, "sessions_spawn", MAIN, { task: "hang please", label: "limited" });
    await running(sys, sp.runId);
    const R = randomUUID();
    // It hangs too: the second steer below must find it running (a steered turn that had already
    // finished would answer "already finished", not the rate limit).
    const message = "steer once, hang on";
    const prev = (await registry(sys).get(sp.runId))!;
    const runId = toolCallIds(turnCaller(R), "subagents.steer").id(prev.childSessionKey, message);
    // The first attempt of turn R took the window, then its worker died before anything else.
    await sys.svc.redis.set(`${sys.svc.keys.base}:sa:steer:${MAIN}:${prev.childSessionKey}`, runId, "PX", 60_000);
    const again = await subagentsTool(sys.svc, turnCaller(R), { action: "steer", target: "limited", message });
    expect(again).toMatchObject({ status: "accepted", runId, text: "steered limited." });
    // Another steer inside the window is still limited.
    const other = await subagentsTool(sys.svc, turnCaller(randomUUID()), {
      action: "steer",
      target: "limited",
      message: "steer twice",
    });
    expect(other).toMatchObject({ status: "rate_limited" });
  });
});
