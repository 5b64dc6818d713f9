/**
 * A spawn cut off between registering its run and queuing the child's turn (a gateway killed -9)
 * leaves a run that nothing runs (src/subagents/unqueued.ts). A `/stop`, `sessions.reset` or
 * `sessions.delete` of its requester, or a reset or delete of its own child session, ends it at
 * once as a kill does (killed, announce suppressed, its slot free, a waiting orchestrator
 * released), instead of leaving it to its grace period (docs/concepts/subagents.md, "Cleanup").
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { httpJson } from "../helpers/system.js";
import { cleanUp, deploy, inbound, onCleanUp, runOk } from "../helpers/api.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";
import { spawnGateway, type GatewayProcess } from "../fixtures/runs-support.js";
import { chat, queuesQuiet, scriptAgent, tool, toolsConfig, textOf, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import type { SubagentRun } from "../../src/subagents/registry.js";
import { isTerminal } from "../../src/runs/run-status.js";

const MAIN = "agent:main:main";

afterEach(cleanUp);

/** A gateway process talking to the deployment's Redis through a TCP proxy (see cutOffSpawn). */
interface DoomedGateway {
  proxy: TcpProxy;
  gateway: GatewayProcess;
}

async function doomedGateway(sys: TestSystem): Promise<DoomedGateway> {
  const proxy = await startTcpProxy(sys.config.redis.url);
  onCleanUp(() => proxy.close());
  const gateway = await spawnGateway({ ...sys.config, redis: { ...sys.config.redis, url: proxy.url } });
  onCleanUp(() => gateway.kill9());
  return { proxy, gateway };
}

/**
 * A sessions_spawn by `requester` through a gateway process killed -9 right after its
 * registration reached Redis (the reply held back): the child's turn was never queued.
 */
async function cutOffSpawn(sys: TestSystem, label: string, requester: string, doomed?: DoomedGateway) {
  const { proxy, gateway } = doomed ?? (await doomedGateway(sys));
  const held = proxy.holdRepliesWhen((sent) => sent.includes(":sa:active:") && sent.includes(":sa:child:"));
  const answer = httpJson("POST", `${gateway.url}/v1/tools/sessions_spawn`, {
    sessionKey: requester,
    args: { task: "lost job", label },
  }).then(
    () => "answered",
    () => "connection lost",
  );
  await held;
  await gateway.kill9();
  expect(await answer).toBe("connection lost");
  const [run, ...more] = (await registry(sys).activeRuns(requester)).filter((r) => r.label === label);
  expect(more).toEqual([]);
  expect(run).toMatchObject({ label, status: "running" });
  expect(await sys.svc.runs.get(run!.runId)).toBeNull();
  expect(await sys.svc.sessions.get(run!.childSessionKey)).not.toBeNull();
  return run!;
}

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
  /** One child slot; a first child has run (the registration script is in Redis's script cache). */
  async function deployment(): Promise<TestSystem> {
    const sys = await deploy(
      toolsConfig({
        agents: {
          defaults: { subagents: { archiveAfterMinutes: 0, maxChildrenPerAgent: 1 } },
          list: [
            scriptAgent("main", [{ when: { contains: COMPLETION }, reply: "NO_REPLY" }, { reply: "done: {{text}}" }], {
              default: true,
            }),
          ],
        },
      }),
    );
    await chat(sys, "main", "1", "hello");
    const warm = await tool(sys, "sessions_spawn", MAIN, { task: "warm up" });
    expect(await announced(sys, warm.runId)).toMatchObject({ status: "ok", announce: "delivered" });
    return sys;
  }

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
    const sys = await deployment();
    const lost = await cutOffSpawn(sys, "lost", MAIN);
    const stop = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "1", text: "/stop" });
    expect(stop.body).toMatchObject({ command: "stop", stopped: 1 });
    await endedAtOnce(sys, lost);
    // A child session kept (`cleanup: "keep"`), as a kill keeps it.
    expect(await sys.svc.sessions.get(lost.childSessionKey)).not.toBeNull();
    await slotFree(sys, MAIN, lost);
  }, 60_000);

  it("sessions.reset ends it at once and frees its slot", async () => {
    const sys = await deployment();
    const lost = await cutOffSpawn(sys, "lost", MAIN);
    expect(await sys.rpc("sessions.reset", { key: MAIN })).toMatchObject({ stopped: 1 });
    await endedAtOnce(sys, lost);
    await slotFree(sys, MAIN, lost);
  }, 60_000);

  it("sessions.delete ends it at once; a child session to delete goes with it", async () => {
    const sys = await deployment();
    const hello = await inbound(sys, { channel: "tg", chatType: "group", from: "7", groupId: "g1", text: "hello" });
    await runOk(sys, hello.runId);
    const group = hello.sessionKey;
    const doomed = await doomedGateway(sys);
    // The requester's spawn asks for its child to be deleted after its run.
    const held = doomed.proxy.holdRepliesWhen((sent) => sent.includes(":sa:active:") && sent.includes(":sa:child:"));
    const answer = httpJson("POST", `${doomed.gateway.url}/v1/tools/sessions_spawn`, {
      sessionKey: group,
      args: { task: "lost job", label: "lost", cleanup: "delete" },
    }).catch(() => "connection lost");
    await held;
    await doomed.gateway.kill9();
    expect(await answer).toBe("connection lost");
    const [lost] = await registry(sys).activeRuns(group);
    expect(lost).toMatchObject({ label: "lost", cleanup: "delete", status: "running" });
    expect(await sys.svc.runs.get(lost!.runId)).toBeNull();

    expect(await sys.rpc("sessions.delete", { key: group })).toMatchObject({ deleted: true, stopped: 1 });
    await endedAtOnce(sys, lost!);
    expect(await sys.svc.sessions.get(lost!.childSessionKey)).toBeNull();
  }, 60_000);
});

/**
 * `main` may spawn an orchestrator (maxSpawnDepth 2), which spawns leaf-a and yields; leaf-a
 * ends LEAF_A_MS later, after the cut-off spawn of leaf-b (from the orchestrator's session)
 * has registered.
 */
const LEAF_A_MS = 2000;

async function orchestratorDeployment(): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0, maxChildrenPerAgent: 2 } },
        list: [
          scriptAgent(
            "main",
            [
              { when: { regex: "Subagent completion event[\\s\\S]*leaf-a" }, reply: "ORCH: saw A" },
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              {
                when: { contains: "orchestrate" },
                tools: [
                  { name: "sessions_spawn", args: { task: "leaf a work", label: "leaf-a" } },
                  { name: "sessions_yield", args: {} },
                ],
              },
              { when: { contains: "leaf a work" }, delayMs: LEAF_A_MS, reply: "RESULT-A" },
              { reply: "done: {{text}}" },
            ],
            { default: true, subagents: { maxSpawnDepth: 2 } },
          ),
        ],
      },
    }),
  );
  await chat(sys, "main", "1", "hello");
  const warm = await tool(sys, "sessions_spawn", MAIN, { task: "warm up" });
  expect(await announced(sys, warm.runId)).toMatchObject({ status: "ok", announce: "delivered" });
  return sys;
}

/** An orchestrator that answered leaf-a's completion and whose report waits for the cut-off leaf-b. */
async function orchestratorWaitingForCutOff(sys: TestSystem): Promise<{ orch: SubagentRun; lost: SubagentRun }> {
  const doomed = await doomedGateway(sys);
  const spawned = await tool(sys, "sessions_spawn", MAIN, { task: "orchestrate", label: "orch" });
  expect(spawned.status).toBe("accepted");
  const orchKey: string = spawned.childSessionKey;
  const lost = await cutOffSpawn(sys, "leaf-b", orchKey, doomed);
  const leafA = await settle(
    async () => (await registry(sys).forRequester(orchKey)).find((r) => r.label === "leaf-a"),
    { what: "leaf-a registered" },
  );
  expect(isTerminal((await sys.svc.runs.get(leafA.runId))?.status)).toBe(false);
  expect(await announced(sys, leafA.runId)).toMatchObject({ status: "ok", announce: "delivered" });
  await settle(
    async () => (await transcript(sys, orchKey)).some((m) => m.role === "assistant" && textOf(m) === "ORCH: saw A"),
    { what: "the orchestrator's answer to leaf-a's completion" },
  );
  await queuesQuiet(sys);
  const orch = await registry(sys).get(spawned.runId);
  expect(orch).toMatchObject({ announce: "deferred" });
  return { orch: orch!, lost };
}

/** The orchestrator reports once, on its answer to leaf-a (well within the grace period). */
async function reportsOnceOnItsAnswer(sys: TestSystem, orch: SubagentRun): Promise<void> {
  expect(await announced(sys, orch.runId, 10_000)).toMatchObject({
    announce: "delivered",
    frozenResult: "ORCH: saw A",
  });
  await queuesQuiet(sys);
  const reports = (await announceDeliveries(sys, MAIN)).filter((d) => d.message.includes(orch.childSessionKey));
  expect(reports).toHaveLength(1);
  expect(reports[0].message).toContain("ORCH: saw A");
}

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
