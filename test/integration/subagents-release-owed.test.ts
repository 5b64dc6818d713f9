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
import { cleanUp } from "../helpers/api.js";
import { queuesQuiet } from "../fixtures/tools-support.js";
import {
  ageIt,
  doomedGateway,
  orchestratorDeployment,
  orchestratorWaitingForCutOff,
  registry,
  reportsOf,
  reportsOnceOnItsAnswer,
  toolCallCutOff,
} from "../fixtures/subagents-support.js";
import { owedReleaseMember, type SubagentRun } from "../../src/subagents/registry.js";
import { dropUnqueued, RELEASE_OWED_GRACE_MS, releaseOwed, UNQUEUED_GRACE_MS } from "../../src/subagents/unqueued.js";

afterEach(cleanUp);

/** orchestratorDeployment with the maintenance sweep every `sweepEveryMs`. */
async function deployment(sweepEveryMs: number): Promise<TestSystem> {
  return await orchestratorDeployment({ maintenance: { sweepEveryMs } });
}

async function owed(sys: TestSystem): Promise<string[]> {
  return await sys.svc.redis.zrange(sys.svc.keys.subagentReleaseOwed(), 0, -1);
}

/** Still waiting: nothing reported, and nothing on its way that would report. */
async function stillWaits(sys: TestSystem, orch: SubagentRun): Promise<void> {
  await queuesQuiet(sys);
  expect(await registry(sys).get(orch.runId)).toMatchObject({ announce: "deferred" });
  expect(await reportsOf(sys, orch.childSessionKey)).toEqual([]);
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
    const isEnd = (sent: string) =>
      sent.includes(`:sa:child:${lost.childSessionKey}`) &&
      sent.includes(`:sa:active:${orchKey}`) &&
      sent.includes("$3\r\nend\r\n");
    await toolCallCutOff(await doomedGateway(sys), "subagents", orchKey, { action: "kill", target: "leaf-b" }, isEnd);
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
    await reportsOnceOnItsAnswer(sys, orch, 15_000);
    expect(await owed(sys)).toEqual([]);
    // Later sweeps find nothing owed, and nothing more is reported.
    await new Promise((r) => setTimeout(r, 2500));
    await reportsOnceOnItsAnswer(sys, orch, 15_000);
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
    await ageIt(sys, lost);
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
    await reportsOnceOnItsAnswer(sys, orch, 15_000);

    // The release done again (a slow caller racing the sweep) reports nothing more.
    await sys.svc.redis.zadd(sys.svc.keys.subagentReleaseOwed(), 1, owedReleaseMember(lost));
    expect(await releaseOwed(sys.svc, 100)).toEqual({ released: 1, failed: 0 });
    await reportsOnceOnItsAnswer(sys, orch, 15_000);
  }, 120_000);
});
