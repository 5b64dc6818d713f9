/**
 * A leaf's announce that fails on its last attempt releases the orchestrator that waits for it
 * (docs/concepts/subagents.md, "Orchestrators"). When Redis fails that release too, the release
 * must not be lost: the job is not failed for good while it is owed, and comes back (without
 * counting an attempt) until Redis answers again. Before, the job failed for good with the release
 * swallowed, and the orchestrator waited for ever (its report `deferred`).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { cleanUp, deploy } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";
import { chat, textOf, tool, toolsConfig } from "../fixtures/tools-support.js";
import {
  completionTurns,
  MAIN,
  orchestratorAgent,
  registry,
  reportsOnceOnItsAnswer,
} from "../fixtures/subagents-support.js";
import { announceJobId } from "../../src/subagents/announce.js";
import { isTerminal } from "../../src/runs/run-status.js";

afterEach(cleanUp);

/** `main` may spawn an orchestrator, which spawns leaf-a and yields; one attempt per announce. */
async function deployment(): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      agents: {
        // Tries of a last attempt that could not be given up come back after 1 s: the test repairs
        // Redis while the job waits between two of them.
        defaults: { subagents: { archiveAfterMinutes: 0, announceAttempts: 1, announceBackoffMs: 1000 } },
        // leaf-a must still run after the orchestrator has yielded and the test broke Redis's answers.
        list: [orchestratorAgent(5000)],
      },
    }),
  );
  await chat(sys, "main", "1", "hello");
  return sys;
}

describe("a leaf announce given up while Redis fails the release of its orchestrator", () => {
  it("comes back until the release is done: the orchestrator reports once, on its answer", async () => {
    const sys = await deployment();
    const spawned = await tool(sys, "sessions_spawn", MAIN, { task: "orchestrate", label: "orch" });
    expect(spawned.status).toBe("accepted");
    const orchKey: string = spawned.childSessionKey;
    // The orchestrator yielded: its report waits for leaf-a.
    await settle(async () => (await registry(sys).get(spawned.runId))?.announce === "deferred", {
      what: "the orchestrator's report deferred",
    });
    const leafA = (await registry(sys).forRequester(orchKey)).find((r) => r.label === "leaf-a")!;
    expect(leafA).toBeDefined();
    expect(isTerminal((await sys.svc.runs.get(leafA.runId))?.status)).toBe(false);

    // Redis refuses every command on the key naming the orchestrator's current run (it holds a
    // hash now: WRONGTYPE), which both leaf-a's announce and the release of the orchestrator
    // read: the announce's only attempt fails, and so does the release that gives it up.
    const currentRunKey = `${sys.svc.keys.base}:sa:child:${orchKey}`;
    expect(await sys.svc.redis.get(currentRunKey)).toBe(spawned.runId);
    await sys.svc.redis.multi().del(currentRunKey).hset(currentRunKey, "broken", "1").exec();

    // Its only attempt has failed, and failed again each time it came back.
    const jobId = announceJobId(leafA.childSessionKey, leafA.runId);
    const job = await settle(
      async () => {
        const j = await sys.svc.queues.announce.getJob(jobId);
        if (!j || !isTerminal((await sys.svc.runs.get(leafA.runId))?.status)) return undefined;
        return (await j.getState()) === "failed" || j.attemptsStarted >= 3 ? j : undefined;
      },
      { what: "leaf-a's announce failed and tried again", timeoutMs: 15_000 },
    );
    // Not given up for good while the release is owed: no attempt counted, nothing marked failed.
    expect(await job.getState()).not.toBe("failed");
    expect(job.attemptsMade).toBe(0);
    expect(await registry(sys).get(leafA.runId)).toMatchObject({ announce: "pending" });
    expect(await registry(sys).get(spawned.runId)).toMatchObject({ announce: "deferred" });

    // Redis answers again, while the job waits for its next try: that try gets through whole. (Not
    // in the middle of a try: its announce would fail and its give-up then succeed, leaf-a given up
    // as failed and the orchestrator released to report on its own answer, which is right too, but
    // not what this test is about.)
    await settle(async () => (await sys.svc.queues.announce.getJob(jobId))?.getState().then((s) => s === "delayed"), {
      what: "leaf-a's announce job waiting for its next try",
      stepMs: 5,
    });
    await sys.svc.redis.multi().del(currentRunKey).set(currentRunKey, spawned.runId).exec();
    await reportsOnceOnItsAnswer(sys, { runId: spawned.runId, childSessionKey: orchKey }, 15_000);
    // leaf-a's own completion reached the orchestrator once.
    expect((await completionTurns(sys, orchKey)).filter((m) => textOf(m).includes("RESULT-A"))).toHaveLength(1);
  }, 60_000);
});
