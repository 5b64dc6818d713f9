/**
 * A spawn cut off between registering its run and queuing the child's turn (a gateway killed -9)
 * leaves a run that nothing runs (src/subagents/unqueued.ts). A `/stop`, `sessions.reset` or
 * `sessions.delete` of its requester, or a reset or delete of its own child session, ends it at
 * once as a kill does (killed, announce suppressed, its slot free, a waiting orchestrator
 * released), instead of leaving it to its grace period (docs/concepts/subagents.md, "Cleanup").
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { cleanUp, inbound, runOk } from "../helpers/api.js";
import { queuesQuiet, tool, textOf } from "../fixtures/tools-support.js";
import {
  announced,
  completionTurns,
  cutOffSpawn,
  doomedGateway,
  isRegistration,
  MAIN,
  oneSlotDeployment,
  orchestratorDeployment,
  orchestratorWaitingForCutOff,
  registry,
  reportsOnceOnItsAnswer,
  toolCallCutOff,
} from "../fixtures/subagents-support.js";
import type { SubagentRun } from "../../src/subagents/registry.js";

afterEach(cleanUp);

/** Ended as a kill ends it, and no longer holding its requester's slot. */
async function endedAtOnce(sys: TestSystem, run: SubagentRun): Promise<void> {
  expect(await registry(sys).get(run.runId)).toMatchObject({
    status: "killed",
    announce: "suppressed",
    suppressAnnounce: "killed",
  });
  expect(await registry(sys).activeCount(run.requesterSessionKey)).toBe(0);
}

describe("a spawn cut off before its turn was queued, when its requester is stopped", () => {
  /** Within the grace period (no run was aged): the requester spawns again at once. */
  async function slotFree(sys: TestSystem, requester: string, lost: SubagentRun): Promise<void> {
    const next = await tool(sys, "sessions_spawn", requester, { task: "next job" });
    expect(next.status).toBe("accepted");
    expect(await announced(sys, next.runId)).toMatchObject({ status: "ok", announce: "delivered" });
    await queuesQuiet(sys);
    expect((await completionTurns(sys, requester)).filter((m) => textOf(m).includes('"lost"'))).toEqual([]);
    expect((await registry(sys).get(lost.runId))?.status).toBe("killed");
  }

  it("/stop ends it at once and frees its slot", async () => {
    const sys = await oneSlotDeployment();
    const lost = await cutOffSpawn(sys, "lost", MAIN);
    const stop = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "1", text: "/stop" });
    expect(stop.body).toMatchObject({ command: "stop", stopped: 1 });
    await endedAtOnce(sys, lost);
    // A child session kept (`cleanup: "keep"`), as a kill keeps it.
    expect(await sys.svc.sessions.get(lost.childSessionKey)).not.toBeNull();
    await slotFree(sys, MAIN, lost);
  }, 60_000);

  it("sessions.reset ends it at once and frees its slot", async () => {
    const sys = await oneSlotDeployment();
    const lost = await cutOffSpawn(sys, "lost", MAIN);
    expect(await sys.rpc("sessions.reset", { key: MAIN })).toMatchObject({ stopped: 1 });
    await endedAtOnce(sys, lost);
    await slotFree(sys, MAIN, lost);
  }, 60_000);

  it("sessions.delete ends it at once; a child session to delete goes with it", async () => {
    const sys = await oneSlotDeployment();
    const hello = await inbound(sys, { channel: "tg", chatType: "group", from: "7", groupId: "g1", text: "hello" });
    await runOk(sys, hello.runId);
    const group = hello.sessionKey;
    const doomed = await doomedGateway(sys);
    // The requester's spawn asks for its child to be deleted after its run.
    const args = { task: "lost job", label: "lost", cleanup: "delete" };
    await toolCallCutOff(doomed, "sessions_spawn", group, args, isRegistration);
    const [lost] = await registry(sys).activeRuns(group);
    expect(lost).toMatchObject({ label: "lost", cleanup: "delete", status: "running" });
    expect(await sys.svc.runs.get(lost!.runId)).toBeNull();

    expect(await sys.rpc("sessions.delete", { key: group })).toMatchObject({ deleted: true, stopped: 1 });
    await endedAtOnce(sys, lost!);
    expect(await sys.svc.sessions.get(lost!.childSessionKey)).toBeNull();
  }, 60_000);
});

describe("a cut-off leaf of an orchestrator, when its own session is reset or deleted", () => {
  it("sessions.reset of the leaf's session ends it at once: the orchestrator reports once", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    expect(await sys.rpc("sessions.reset", { key: lost.childSessionKey })).toMatchObject({ stopped: 1 });
    await endedAtOnce(sys, lost);
    await reportsOnceOnItsAnswer(sys, orch);
    // The session itself is renewed, as reset asked.
    expect(await sys.svc.sessions.get(lost.childSessionKey)).not.toBeNull();
  }, 90_000);

  it("sessions.delete of the leaf's session ends it at once: the orchestrator reports once", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    expect(await sys.rpc("sessions.delete", { key: lost.childSessionKey })).toMatchObject({
      deleted: true,
      stopped: 1,
    });
    await endedAtOnce(sys, lost);
    expect(await sys.svc.sessions.get(lost.childSessionKey)).toBeNull();
    await reportsOnceOnItsAnswer(sys, orch);
  }, 90_000);

  it("sessions.delete of the orchestrator's session ends the leaf at once", async () => {
    const sys = await orchestratorDeployment();
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    expect(await sys.rpc("sessions.delete", { key: orch.childSessionKey })).toMatchObject({ deleted: true });
    await endedAtOnce(sys, lost);
    // Nothing it spawned is left pending: its report is not left waiting for ever.
    expect((await announced(sys, orch.runId, 10_000)).announce).not.toBe("deferred");
  }, 90_000);
});
