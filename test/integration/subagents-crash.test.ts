/**
 * Sub-agents with real worker processes: a worker killed -9 between a child's completion and
 * its announce does not lose the announce nor double it; a kill cascades to descendants running
 * on two different worker processes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { FAST_WORKERS, type ChildHandle, type TestSystem } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import { spawnWorker } from "../fixtures/runs-support.js";
import { scriptAgent, queuesQuiet, tool, toolsConfig } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { announceJobId } from "../../src/subagents/announce.js";
import { settle } from "../helpers/settle.js";

const MAIN = "agent:main:main";
afterEach(cleanUp);

async function deployment(): Promise<TestSystem> {
  return await deploy(
    toolsConfig({
      workers: { ...FAST_WORKERS },
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0 } },
        list: [
          scriptAgent(
            "main",
            [
              // Completion turns first (their text quotes the task): quick b's hangs, the rest are silent.
              { when: { contains: 'Sub-agent "quick b"' }, delayMs: 20_000, reply: "NO_REPLY" },
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              {
                when: { contains: "fan out" },
                tools: [
                  { name: "sessions_spawn", args: { task: "hang a" } },
                  { name: "sessions_spawn", args: { task: "quick b" } },
                ],
                reply: "fanned",
              },
              {
                when: { contains: "orchestrate" },
                tools: [{ name: "sessions_spawn", args: { task: "fan out" } }],
                reply: "orchestrating",
              },
              { when: { contains: "hang a" }, delayMs: 20_000, reply: "never" },
              { when: { contains: "Subagent Task" }, delayMs: 200, reply: "child result {{runId}}" },
              { reply: "main: {{text}}" },
            ],
            { default: true, subagents: { maxSpawnDepth: 3 } },
          ),
        ],
      },
    }),
    { gateway: true, workers: false },
  );
}

async function worker(sys: TestSystem, args: string[] = []): Promise<ChildHandle> {
  const w = await spawnWorker(sys.config, args);
  onCleanUp(() => w.kill9());
  return w;
}

async function startRequester(sys: TestSystem): Promise<void> {
  const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "1", text: "hello", agentId: "main" });
  expect((await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 15_000 })).status).toBe("ok");
}

async function expectAnnouncedOnce(sys: TestSystem, childKey: string): Promise<void> {
  await queuesQuiet(sys, 300, 30_000);
  expect((await announceDeliveries(sys, MAIN)).filter((d) => d.message.includes(childKey))).toHaveLength(1);
  expect((await completionTurns(sys, MAIN)).filter((m) => JSON.stringify(m.content).includes(childKey))).toHaveLength(
    1,
  );
}

describe("sub-agents: crashes and cross-process kills", () => {
  it("worker killed -9 after the child completed, before its announce: announced once by another worker", async () => {
    const sys = await deployment();
    // A has no announce worker: the announce job is guaranteed to be still pending when A dies.
    const a = await worker(sys, ["--queues", "runs,subagents,delivery,maintenance"]);
    await startRequester(sys);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "research" });
    await settle(async () => (await sys.get(`/v1/runs/${res.runId}`)).body.status === "ok", {
      what: "the child run ok (its announce not yet delivered)",
      timeoutMs: 15_000,
      stepMs: 20,
    });
    const job = await sys.svc.queues.announce.getJob(announceJobId(res.childSessionKey, res.runId));
    expect(await job?.getState()).toBe("waiting");
    await a.kill9();

    await worker(sys);
    expect(await announced(sys, res.runId, 30_000)).toMatchObject({ status: "ok", announce: "delivered" });
    await expectAnnouncedOnce(sys, res.childSessionKey);
  }, 90_000);

  it("worker killed -9 the moment the child's run finished (announce in any state): still exactly once", async () => {
    const sys = await deployment();
    const a = await worker(sys);
    await startRequester(sys);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "research again" });
    await settle(async () => (await sys.get(`/v1/runs/${res.runId}`)).body.status === "ok", {
      what: "the child run ok",
      timeoutMs: 15_000,
      stepMs: 5,
    });
    await a.kill9();
    await worker(sys);
    expect(await announced(sys, res.runId, 30_000)).toMatchObject({ status: "ok", announce: "delivered" });
    await expectAnnouncedOnce(sys, res.childSessionKey);
  }, 90_000);

  /** Until the run's own run is over and its report waits for its sub-agents. */
  async function reportWaiting(sys: TestSystem, runId: string): Promise<void> {
    await settle(async () => (await registry(sys).get(runId))?.announce === "deferred", {
      what: `run ${runId}'s report waiting for its sub-agents`,
      timeoutMs: 20_000,
    });
  }

  it("kill cascades to descendants running on two different worker processes", async () => {
    const sys = await deployment();
    // One sub-agent run per process at a time: two hanging sub-agent runs must be on two processes.
    await worker(sys, ["--concurrency", "1"]);
    await worker(sys, ["--concurrency", "1"]);
    await startRequester(sys);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "orchestrate", label: "orch" });
    // Its run ends at once; its report waits for its sub-agents (announce deferred).
    await reportWaiting(sys, res.runId);
    expect((await sys.get(`/v1/runs/${res.runId}`)).body.status).toBe("ok");
    // Below it: "fan out" spawned "hang a" (hangs) and "quick b" (done; its completion turn hangs in the fan-out
    // session). The fan-out's report waits for "hang a" too.
    const [fanKey] = await settle(
      async () => {
        const keys = await sys.svc.sessions.childKeys(res.childSessionKey);
        return keys.length ? keys : undefined;
      },
      { what: "the fan-out spawned", timeoutMs: 20_000 },
    );
    const fanRunId = (await registry(sys).currentRunOf(fanKey!))!;
    await reportWaiting(sys, fanRunId);
    const grandKeys = await sys.svc.sessions.childKeys(fanKey!);
    expect(grandKeys).toHaveLength(2);
    const runsOf = await Promise.all(
      grandKeys.map(async (k) => (await registry(sys).get((await registry(sys).currentRunOf(k))!))!),
    );
    const hanging = runsOf.find((r) => r.task === "hang a")!;
    await settle(async () => (await sys.get(`/v1/runs/${hanging.runId}`)).body.status === "running", {
      what: "grandchild 'hang a' running",
      timeoutMs: 15_000,
    });
    const completion = await settle(
      async () => {
        const inflight = await sys.svc.inbox.inflightTurn(fanKey!);
        return inflight && (await sys.get(`/v1/runs/${inflight.runId}`)).body.status === "running"
          ? inflight
          : undefined;
      },
      { what: "quick b's completion turn running in the fan-out session", timeoutMs: 20_000 },
    );

    const list = await tool(sys, "subagents", MAIN, {});
    // Pending below it: the fan-out (its report waiting) and "hang a".
    expect(list.active).toEqual([expect.objectContaining({ label: "orch", status: "ok", pendingDescendants: 2 })]);
    const t0 = Date.now();
    const killed = await tool(sys, "subagents", MAIN, { action: "kill", target: "orch" });
    // The fan-out, waiting for "hang a", is still active: killed with it.
    expect(killed).toMatchObject({ status: "ok", text: "killed 1 subagent(s).", cascadeKilled: 2 });
    const hangDone = await sys.rpc("agent.wait", { runId: hanging.runId, timeoutMs: 10_000 });
    const compDone = await sys.rpc("agent.wait", { runId: completion!.runId, timeoutMs: 10_000 });
    expect([hangDone.status, compDone.status]).toEqual(["killed", "killed"]);
    expect(Date.now() - t0).toBeLessThan(8000); // they hang for 20 s: it was the kill
    expect(await announced(sys, hanging.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    // Nobody reports: the fan-out and the orchestrator were killed while their reports waited.
    expect(await announced(sys, fanRunId)).toMatchObject({ status: "ok", announce: "suppressed" });
    expect(await announced(sys, res.runId)).toMatchObject({ status: "ok", announce: "suppressed" });
  }, 90_000);
});
