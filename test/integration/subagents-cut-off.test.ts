/**
 * A spawn cut off between registering its run and queuing the child's turn (a gateway killed -9,
 * a Redis error on the push) leaves a run that nothing runs and no announce job ends. It must
 * not hold a child slot for good (docs/concepts/subagents.md, "Cleanup"): a kill ends it, a
 * failed push undoes it at once, and with nobody acting it is dropped once older than the grace
 * period, by the next spawn at the limit or the next `subagents` call.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { httpJson } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";
import { spawnGateway, type GatewayProcess } from "../fixtures/runs-support.js";
import { chat, queuesQuiet, scriptAgent, tool, toolsConfig, textOf, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { sessionsSpawn } from "../../src/tools/sessions-spawn.js";
import { toolCallIds } from "../../src/tools/call-ids.js";
import type { ToolCaller } from "../../src/tools/tool-context.js";
import { subagentSessionKey } from "../../src/session/key-build.js";
import type { SubagentRun } from "../../src/subagents/registry.js";
import { UNQUEUED_GRACE_MS } from "../../src/subagents/unqueued.js";
import { isTerminal } from "../../src/runs/run-status.js";

const MAIN = "agent:main:main";
const LIMIT_ERROR = "sessions_spawn has reached max active children for this session (1/1)";

afterEach(cleanUp);

/** One child slot; a first child has run (so the registration script is in Redis's script cache). */
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
 * A sessions_spawn by `requester` through a gateway process that is killed -9 right after its
 * registration reached Redis: the reply to the registration script is held back, then the
 * process dies before it could queue the child's turn. Returns the run it left registered.
 */
async function cutOffSpawn(
  sys: TestSystem,
  label: string,
  requester = MAIN,
  doomed?: DoomedGateway,
): Promise<SubagentRun> {
  const { proxy, gateway } = doomed ?? (await doomedGateway(sys));
  // The registration is the one command naming both the requester's active set and the child's run.
  const held = proxy.holdRepliesWhen((sent) => sent.includes(":sa:active:") && sent.includes(":sa:child:"));
  const args = { task: "lost job", label };
  const answer = httpJson("POST", `${gateway.url}/v1/tools/sessions_spawn`, { sessionKey: requester, args }).then(
    () => "answered",
    () => "connection lost",
  );
  await held;
  await gateway.kill9();
  expect(await answer).toBe("connection lost");
  const [run, ...more] = (await registry(sys).activeRuns(requester)).filter((r) => r.label === label);
  expect(more).toEqual([]);
  expect(run).toMatchObject({ label, status: "running" });
  // Its turn was never queued: no run record.
  expect(await sys.svc.runs.get(run!.runId)).toBeNull();
  expect(await sys.svc.sessions.get(run!.childSessionKey)).not.toBeNull();
  return run!;
}

/** The registration as it looks once older than the grace period (its createdAt moved back). */
async function ageIt(sys: TestSystem, run: SubagentRun): Promise<void> {
  await registry(sys).update(run.runId, { createdAt: Date.now() - UNQUEUED_GRACE_MS - 1000 });
}

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
    const sys = await deployment();
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
    const sys = await deployment();
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
    const sys = await deployment();
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
    const sys = await deployment();
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

/**
 * `main` may spawn an orchestrator (maxSpawnDepth 2), which spawns leaf-a and yields; leaf-a
 * ends LEAF_A_MS later, long after the cut-off spawn of leaf-b (from the orchestrator's session)
 * has registered. A first child has run (the registration script is in Redis's script cache).
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

/** The orchestrator's reports posted to main's chat. */
async function reportsOf(sys: TestSystem, orchKey: string): Promise<string[]> {
  return (await announceDeliveries(sys, MAIN)).filter((d) => d.message.includes(orchKey)).map((d) => d.message);
}

/**
 * An orchestrator that spawned leaf-a and the cut-off leaf-b and yielded, once it has answered
 * leaf-a's completion: its report waits (deferred) for leaf-b, which nothing will ever end.
 */
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
  // leaf-b was registered while leaf-a still ran: leaf-a's completion finds it pending.
  expect(isTerminal((await sys.svc.runs.get(leafA.runId))?.status)).toBe(false);
  expect(await announced(sys, leafA.runId)).toMatchObject({ status: "ok", announce: "delivered" });
  await settle(
    async () => (await transcript(sys, orchKey)).some((m) => m.role === "assistant" && textOf(m) === "ORCH: saw A"),
    { what: "the orchestrator's answer to leaf-a's completion" },
  );
  await queuesQuiet(sys);
  const orch = await registry(sys).get(spawned.runId);
  expect(orch).toMatchObject({ announce: "deferred" });
  expect(await reportsOf(sys, orchKey)).toEqual([]);
  return { orch: orch!, lost };
}

/** The orchestrator reports once, on its answer to leaf-a, and nothing more comes. */
async function reportsOnceOnItsAnswer(sys: TestSystem, orch: SubagentRun): Promise<void> {
  expect(await announced(sys, orch.runId, 10_000)).toMatchObject({
    announce: "delivered",
    frozenResult: "ORCH: saw A",
  });
  await queuesQuiet(sys);
  const reports = await reportsOf(sys, orch.childSessionKey);
  expect(reports).toHaveLength(1);
  expect(reports[0]).toContain("ORCH: saw A");
  const turns = (await completionTurns(sys, MAIN)).filter((m) => textOf(m).includes(orch.childSessionKey));
  expect(turns).toHaveLength(1);
}

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
});
