/**
 * A spawn cut off between registering its run and queuing the child's turn (a gateway killed -9,
 * a Redis error on the push) leaves a run that nothing runs and no announce job ends. It must
 * not hold a child slot for good (docs/concepts/subagents.md, "Cleanup"): a kill ends it, a
 * failed push undoes it at once, and with nobody acting it is dropped once older than the grace
 * period, by the next spawn at the limit, the next `subagents` call or the maintenance sweep.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { cleanUp } from "../helpers/api.js";
import { queuesQuiet, tool, textOf } from "../fixtures/tools-support.js";
import {
  ageIt,
  announced,
  completionTurns,
  cutOffSpawn,
  MAIN,
  oneSlotDeployment,
  orchestratorDeployment,
  orchestratorWaitingForCutOff,
  registry,
  reportsOnceOnItsAnswer,
} from "../fixtures/subagents-support.js";
import { sessionsSpawn } from "../../src/tools/sessions-spawn.js";
import { toolCallIds } from "../../src/tools/call-ids.js";
import type { ToolCaller } from "../../src/tools/tool-context.js";
import { subagentSessionKey } from "../../src/session/key-build.js";
import { dropCutOffRuns, UNQUEUED_GRACE_MS } from "../../src/subagents/unqueued.js";

const LIMIT_ERROR = "sessions_spawn has reached max active children for this session (1/1)";

afterEach(cleanUp);

/** A caller whose tool calls are numbered from 0 in the turn `runId` (as each attempt of it is). */
function turnCaller(runId: string): ToolCaller {
  let seq = 0;
  return { sessionKey: MAIN, agentId: "main", sandboxed: false, hop: 0, runId, nextCallSeq: () => seq++ };
}

async function spawnsAgain(sys: TestSystem): Promise<void> {
  const next = await tool(sys, "sessions_spawn", MAIN, { task: "next job" });
  expect(next.status).toBe("accepted");
  expect(await announced(sys, next.runId)).toMatchObject({ status: "ok", announce: "delivered" });
}

describe("a spawn cut off between its registration and its child's turn", () => {
  it("subagents kill ends it (killed, announce suppressed) and frees its slot", async () => {
    const sys = await oneSlotDeployment();
    const lost = await cutOffSpawn(sys, "lost");
    const list = await tool(sys, "subagents", MAIN, {});
    expect(list.active).toEqual([expect.objectContaining({ runId: lost.runId, status: "running" })]);
    // Within the grace period it could be a spawn still on its way: it keeps its slot.
    expect(await tool(sys, "sessions_spawn", MAIN, { task: "next job" })).toMatchObject({
      status: "forbidden",
      error: LIMIT_ERROR,
    });

    expect(await tool(sys, "subagents", MAIN, { action: "kill", target: "lost" })).toMatchObject({
      status: "ok",
      killed: 1,
    });
    expect(await registry(sys).get(lost.runId)).toMatchObject({
      status: "killed",
      announce: "suppressed",
      suppressAnnounce: "killed",
    });
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    const after = await tool(sys, "subagents", MAIN, {});
    expect(after.active).toEqual([]);
    expect(after.recent).toContainEqual(
      expect.objectContaining({ runId: lost.runId, status: "killed", announce: "suppressed" }),
    );
    await spawnsAgain(sys);
    await queuesQuiet(sys);
    expect((await completionTurns(sys, MAIN)).filter((m) => textOf(m).includes('"lost"'))).toEqual([]);
  }, 60_000);

  it("with nobody acting, the next spawn at the limit drops it once it is older than the grace period", async () => {
    const sys = await oneSlotDeployment();
    const lost = await cutOffSpawn(sys, "lost");
    await ageIt(sys, lost);
    await spawnsAgain(sys);
    // Dropped whole: its record, its place in the requester's runs, the child session made for it.
    expect(await registry(sys).get(lost.runId)).toBeNull();
    expect((await registry(sys).forRequester(MAIN)).map((r) => r.runId)).not.toContain(lost.runId);
    expect(await registry(sys).currentRunOf(lost.childSessionKey)).toBeNull();
    expect(await sys.svc.sessions.get(lost.childSessionKey)).toBeNull();
    expect(await sys.svc.sessions.childKeys(MAIN)).not.toContain(lost.childSessionKey);
  }, 60_000);

  it("with nobody acting, a subagents call drops it too: not listed as running, slot free", async () => {
    const sys = await oneSlotDeployment();
    const lost = await cutOffSpawn(sys, "lost");
    await ageIt(sys, lost);
    const list = await tool(sys, "subagents", MAIN, {});
    expect([...list.active, ...list.recent].map((i: { runId: string }) => i.runId)).not.toContain(lost.runId);
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    await spawnsAgain(sys);
  }, 60_000);
});

describe("a spawn whose push fails", () => {
  it("undoes its registration at once; the re-run of its turn spawns afresh", async () => {
    const sys = await oneSlotDeployment();
    const R = randomUUID();
    const args = { task: "pushed job", label: "pushed" };
    const ids = toolCallIds(turnCaller(R), "sessions_spawn");
    const runId = ids.id("main", args.task);
    const childKey = subagentSessionKey("main", ids.id("main", args.task, "child"));
    // Redis refuses the push: the child's inbox key holds a string, and the push's first step
    // (the inbox length, for gateway.limits.maxQueuedTurns) fails with WRONGTYPE, writing nothing.
    await sys.svc.redis.set(sys.svc.keys.inbox(childKey), "not a list");
    await expect(sessionsSpawn(sys.svc, turnCaller(R), args)).rejects.toThrow(/WRONGTYPE/);
    expect(await sys.svc.runs.get(runId)).toBeNull();
    expect(await registry(sys).get(runId)).toBeNull();
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    expect(await sys.svc.sessions.get(childKey)).toBeNull();

    await sys.svc.redis.del(sys.svc.keys.inbox(childKey));
    const again = await sessionsSpawn(sys.svc, turnCaller(R), args);
    expect(again).toMatchObject({ status: "accepted", runId, childSessionKey: childKey });
    expect(await announced(sys, runId)).toMatchObject({ status: "ok", announce: "delivered", label: "pushed" });
  }, 60_000);
});

describe("an orchestrator whose leaf's spawn was cut off", () => {
  it("reports once, on its latest answer, when it kills the cut-off leaf", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    // The orchestrator's own controls: leaf-b is its run, not main's (main sees only the orchestrator).
    expect(await tool(sys, "subagents", orch.childSessionKey, { action: "kill", target: "leaf-b" })).toMatchObject({
      status: "ok",
      killed: 1,
    });
    expect(await registry(sys).get(lost.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    await reportsOnceOnItsAnswer(sys, orch);
    // A kill again finds it finished and reports nothing more.
    expect(await tool(sys, "subagents", orch.childSessionKey, { action: "kill", target: "leaf-b" })).toMatchObject({
      status: "done",
      text: "leaf-b is already finished.",
    });
    await reportsOnceOnItsAnswer(sys, orch);
  }, 90_000);

  it("reports once, on its latest answer, when its next subagents call drops the leaf after the grace", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    await ageIt(sys, lost);
    const list = await tool(sys, "subagents", orch.childSessionKey, {});
    expect([...list.active, ...list.recent].map((i: { runId: string }) => i.runId)).not.toContain(lost.runId);
    expect(await registry(sys).get(lost.runId)).toBeNull();
    expect(await registry(sys).activeCount(orch.childSessionKey)).toBe(0);
    await reportsOnceOnItsAnswer(sys, orch);
    // Another call finds nothing to drop and reports nothing more.
    await tool(sys, "subagents", orch.childSessionKey, {});
    await reportsOnceOnItsAnswer(sys, orch);
  }, 90_000);
  it("reports once, on its latest answer, when the maintenance sweep drops the leaf (nobody acting)", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    // Within the grace period it could be a spawn still on its way: the sweep leaves it.
    expect(await dropCutOffRuns(sys.svc, 100)).toEqual({ examined: 0, dropped: 0, failed: 0 });
    expect(await registry(sys).get(lost.runId)).toMatchObject({ status: "running" });
    // Past it: the orchestrator, main's run, is looked at too and kept (its turn was queued).
    const [seconds] = await sys.svc.redis.time();
    const later = Number(seconds) * 1000 + UNQUEUED_GRACE_MS + 1000;
    // Every registration is looked at (the orchestrator, its turn queued; leaf-a, ended; …) and
    // only leaf-b, never queued, is dropped.
    const registered = await sys.svc.redis.zcard(sys.svc.keys.subagentRegistered());
    expect(registered).toBeGreaterThanOrEqual(3);
    expect(await dropCutOffRuns(sys.svc, 100, { now: later })).toEqual({ examined: registered, dropped: 1, failed: 0 });
    expect(await registry(sys).get(lost.runId)).toBeNull();
    expect(await registry(sys).activeCount(orch.childSessionKey)).toBe(0);
    await reportsOnceOnItsAnswer(sys, orch);
    // What the sweep looked at is forgotten: the next finds nothing, and nothing more is reported.
    expect(await dropCutOffRuns(sys.svc, 100, { now: later })).toEqual({ examined: 0, dropped: 0, failed: 0 });
    await reportsOnceOnItsAnswer(sys, orch);
  }, 90_000);
});
