/**
 * A sub-agent run whose spawn was cut off (no turn queued) ends without an announce: dropped, or
 * ended by a kill, a /stop, a reset or a delete (src/subagents/unqueued.ts). An orchestrator that
 * waits for it must then be released. The end is one Lua step and the release later steps: a
 * process killed (or a Redis error) between them used to leave the orchestrator waiting for ever
 * (its report `deferred`). Now the end records the release as owed in the same step, and the
 * maintenance sweep does a release still owed after a grace period (docs/concepts/subagents.md,
 * "Cleanup").
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { httpJson } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";
import { spawnGateway, type GatewayProcess } from "../fixtures/runs-support.js";
import { chat, queuesQuiet, scriptAgent, tool, toolsConfig, textOf, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { owedReleaseMember, type SubagentRun } from "../../src/subagents/registry.js";
import { dropUnqueued, RELEASE_OWED_GRACE_MS, releaseOwed, UNQUEUED_GRACE_MS } from "../../src/subagents/unqueued.js";
import { isTerminal } from "../../src/runs/run-status.js";

const MAIN = "agent:main:main";
/** How long leaf-a works: long enough for the cut-off spawn of leaf-b to register before it ends. */
const LEAF_A_MS = 2000;

afterEach(cleanUp);

/** `main` may spawn an orchestrator, which spawns leaf-a and yields; a first child has run. */
async function deployment(sweepEveryMs: number): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      maintenance: { sweepEveryMs },
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

/** A gateway process talking to the deployment's Redis through a TCP proxy, to be killed -9. */
async function doomedGateway(sys: TestSystem): Promise<{ proxy: TcpProxy; gateway: GatewayProcess }> {
  const proxy = await startTcpProxy(sys.config.redis.url);
  onCleanUp(() => proxy.close());
  const gateway = await spawnGateway({ ...sys.config, redis: { ...sys.config.redis, url: proxy.url } });
  onCleanUp(() => gateway.kill9());
  return { proxy, gateway };
}

/**
 * An orchestrator that spawned leaf-a and leaf-b and yielded, once it has answered leaf-a's
 * completion; leaf-b's spawn went through a gateway killed -9 right after its registration
 * reached Redis, so its turn was never queued. The orchestrator's report waits for leaf-b.
 */
async function orchestratorWaitingForCutOff(sys: TestSystem): Promise<{ orch: SubagentRun; lost: SubagentRun }> {
  const { proxy, gateway } = await doomedGateway(sys);
  const spawned = await tool(sys, "sessions_spawn", MAIN, { task: "orchestrate", label: "orch" });
  expect(spawned.status).toBe("accepted");
  const orchKey: string = spawned.childSessionKey;
  const held = proxy.holdRepliesWhen((sent) => sent.includes(":sa:active:") && sent.includes(":sa:child:"));
  const answer = httpJson("POST", `${gateway.url}/v1/tools/sessions_spawn`, {
    sessionKey: orchKey,
    args: { task: "lost job", label: "leaf-b" },
  }).then(
    () => "answered",
    () => "connection lost",
  );
  await held;
  await gateway.kill9();
  expect(await answer).toBe("connection lost");
  const [lost] = (await registry(sys).activeRuns(orchKey)).filter((r) => r.label === "leaf-b");
  expect(lost).toMatchObject({ status: "running" });
  expect(await sys.svc.runs.get(lost!.runId)).toBeNull();

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
  return { orch: orch!, lost: lost! };
}

async function reportsOf(sys: TestSystem, orch: SubagentRun): Promise<string[]> {
  return (await announceDeliveries(sys, MAIN))
    .filter((d) => d.message.includes(orch.childSessionKey))
    .map((d) => d.message);
}

async function owed(sys: TestSystem): Promise<string[]> {
  return await sys.svc.redis.zrange(sys.svc.keys.subagentReleaseOwed(), 0, -1);
}

/** Still waiting: nothing reported, and nothing on its way that would report. */
async function stillWaits(sys: TestSystem, orch: SubagentRun): Promise<void> {
  await queuesQuiet(sys);
  expect(await registry(sys).get(orch.runId)).toMatchObject({ announce: "deferred" });
  expect(await reportsOf(sys, orch)).toEqual([]);
}

/** The orchestrator reports once, on its answer to leaf-a, and nothing more comes. */
async function reportsOnceOnItsAnswer(sys: TestSystem, orch: SubagentRun): Promise<void> {
  expect(await announced(sys, orch.runId, 15_000)).toMatchObject({
    announce: "delivered",
    frozenResult: "ORCH: saw A",
  });
  await queuesQuiet(sys);
  const reports = await reportsOf(sys, orch);
  expect(reports).toHaveLength(1);
  expect(reports[0]).toContain("ORCH: saw A");
  const turns = (await completionTurns(sys, MAIN)).filter((m) => textOf(m).includes(orch.childSessionKey));
  expect(turns).toHaveLength(1);
}

describe("an orchestrator's cut-off leaf ended without its release", () => {
  it("a kill whose process dies right after the end: the scheduled sweep releases the orchestrator once", async () => {
    const sys = await deployment(1000);
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    const orchKey = orch.childSessionKey;

    // The end step in Redis's script cache (a held EVALSHA answered NOSCRIPT would run nothing):
    // a kill of a run that is not suppressed is refused, writing nothing.
    expect(await registry(sys).endUnqueued({ ...lost, runId: `${lost.runId}-none` }, Date.now())).toBe(false);

    // The orchestrator kills leaf-b through a gateway killed -9 as soon as the end step (the one
    // command naming leaf-b's session, the orchestrator's active runs and "end") reached Redis:
    // its release never comes from that process.
    const { proxy, gateway } = await doomedGateway(sys);
    const held = proxy.holdRepliesWhen(
      (sent) =>
        sent.includes(`:sa:child:${lost.childSessionKey}`) &&
        sent.includes(`:sa:active:${orchKey}`) &&
        sent.includes("$3\r\nend\r\n"),
    );
    const answer = httpJson("POST", `${gateway.url}/v1/tools/subagents`, {
      sessionKey: orchKey,
      args: { action: "kill", target: "leaf-b" },
    }).then(
      () => "answered",
      () => "connection lost",
    );
    await held;
    await gateway.kill9();
    expect(await answer).toBe("connection lost");
    expect(await registry(sys).get(lost.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    expect(await registry(sys).activeCount(orchKey)).toBe(0);
    await stillWaits(sys, orch);
    // The end recorded the release it owes, in the same step.
    expect(await owed(sys)).toEqual([owedReleaseMember(lost)]);

    // Within the grace period the release is left to the process that ended the run.
    expect(await releaseOwed(sys.svc, 100)).toEqual({ released: 0, failed: 0 });
    await stillWaits(sys, orch);

    // Older than the grace period: the scheduled maintenance sweep (every second here) releases it.
    await sys.svc.redis.zadd(sys.svc.keys.subagentReleaseOwed(), "XX", 1, owedReleaseMember(lost));
    await reportsOnceOnItsAnswer(sys, orch);
    expect(await owed(sys)).toEqual([]);
    // Later sweeps find nothing owed, and nothing more is reported.
    await new Promise((r) => setTimeout(r, 2500));
    await reportsOnceOnItsAnswer(sys, orch);
  }, 120_000);

  it("a drop whose release Redis fails: owed while it fails, the sweep releases the orchestrator once", async () => {
    const sys = await deployment(3_600_000);
    const { orch, lost } = await orchestratorWaitingForCutOff(sys);
    const orchKey = orch.childSessionKey;

    // Redis refuses every command on the key naming the orchestrator's current run (it holds a
    // hash now: WRONGTYPE), which the release reads first: the drop is done, its release fails.
    const currentRunKey = `${sys.svc.keys.base}:sa:child:${orchKey}`;
    expect(await sys.svc.redis.get(currentRunKey)).toBe(orch.runId);
    await sys.svc.redis.multi().del(currentRunKey).hset(currentRunKey, "broken", "1").exec();
    // Older than the spawn's grace period: what the orchestrator's next `subagents` call drops.
    await registry(sys).update(lost.runId, { createdAt: Date.now() - UNQUEUED_GRACE_MS - 1000 });
    await expect(dropUnqueued(sys.svc, registry(sys), lost, Date.now() - UNQUEUED_GRACE_MS)).rejects.toThrow(
      /WRONGTYPE/,
    );
    expect(await registry(sys).get(lost.runId)).toBeNull();
    expect(await registry(sys).activeCount(orchKey)).toBe(0);
    expect(await owed(sys)).toEqual([owedReleaseMember(lost)]);

    // A sweep while Redis still fails it: kept owed, dated again.
    const later = Date.now() + RELEASE_OWED_GRACE_MS + 1000;
    expect(await releaseOwed(sys.svc, 100, later)).toEqual({ released: 0, failed: 1 });
    expect(await owed(sys)).toEqual([owedReleaseMember(lost)]);

    await sys.svc.redis.multi().del(currentRunKey).set(currentRunKey, orch.runId).exec();
    await stillWaits(sys, orch);
    // Within the grace period of its new date it is left alone; past it, the sweep releases it.
    expect(await releaseOwed(sys.svc, 100, later)).toEqual({ released: 0, failed: 0 });
    expect(await releaseOwed(sys.svc, 100, later + RELEASE_OWED_GRACE_MS + 1)).toEqual({ released: 1, failed: 0 });
    expect(await owed(sys)).toEqual([]);
    await reportsOnceOnItsAnswer(sys, orch);

    // The release done again (a slow caller racing the sweep) reports nothing more.
    await sys.svc.redis.zadd(sys.svc.keys.subagentReleaseOwed(), 1, owedReleaseMember(lost));
    expect(await releaseOwed(sys.svc, 100)).toEqual({ released: 1, failed: 0 });
    await reportsOnceOnItsAnswer(sys, orch);
  }, 120_000);
});
