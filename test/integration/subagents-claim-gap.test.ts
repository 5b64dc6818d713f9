/**
 * An orchestrator's report waits for every completion its sub-agents owe it, also in the gap
 * between a sub-agent's end (it leaves the orchestrator's active runs) and the push of its
 * completion turn: the end marks the completion pending in the same step, and only the claim the
 * completion turn carries settles it. Before, a claim in that gap (here: the other leaf's
 * completion turn's) found nothing pending and reported early, without the missed leaf, whose
 * completion then came to an orchestrator already reported (and a crash in the gap made that for
 * good). The gap is held open by holding back Redis's replies to one announce worker.
 */
import { afterEach, describe, expect, it } from "vitest";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import { startPeer, type TestSystem } from "../helpers/system.js";
import { startTcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";
import { chat, queuesQuiet, scriptAgent, textOf, tool, toolsConfig, transcript } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { announceJobId, announceTurnRunId } from "../../src/subagents/announce.js";

const BOSS = "agent:boss:main";
afterEach(cleanUp);

async function deployment(): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0 } },
        list: [
          scriptAgent(
            "boss",
            [
              { when: { regex: "Subagent completion event[\\s\\S]*fastleaf" }, reply: "ORCH-SAW-FAST" },
              { when: { regex: "Subagent completion event[\\s\\S]*slowleaf" }, reply: "ORCH-SAW-SLOW" },
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              {
                when: { contains: "orchestrate pair" },
                tools: [
                  { name: "sessions_spawn", args: { task: "fast job", label: "fastleaf" } },
                  { name: "sessions_spawn", args: { task: "slow job", label: "slowleaf" } },
                  { name: "sessions_yield", args: {} },
                ],
              },
              { when: { contains: "fast job" }, delayMs: 50, reply: "FAST" },
              { when: { contains: "slow job" }, delayMs: 600, reply: "SLOW" },
              { reply: "boss: {{text}}" },
            ],
            { default: true, subagents: { maxSpawnDepth: 2 } },
          ),
        ],
      },
    }),
    // Announces run only on the workers the test starts.
    { gateway: true, workers: { queues: ["runs", "subagents", "delivery", "maintenance"] } },
  );
  await chat(sys, "boss", "1", "hello boss");
  return sys;
}

describe("a leaf's completion on its way to its orchestrator", () => {
  it("holds the orchestrator's report until it arrived: one report, on the answer to the last", async () => {
    const sys = await deployment();
    const proxy = await startTcpProxy(sys.config.redis.url);
    onCleanUp(() => proxy.close());
    // Announce worker A, through the proxy, one job at a time: it takes the fast leaf's announce.
    const a = await startPeer(
      { ...sys.config, redis: { ...sys.config.redis, url: proxy.url } },
      { workers: { queues: ["announce"], concurrency: 1 } },
    );
    onCleanUp(() => a.close());

    const o = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate pair", label: "orch" });
    // The first command naming the orchestrator's active runs that is not about its own record
    // (its claims name it) is a leaf's end: the fast one's. It reaches Redis; A hears nothing back.
    const orchActive = `:sa:active:${o.childSessionKey}`;
    const held = proxy.holdRepliesWhen((sent) => sent.includes(orchActive) && !sent.includes(o.runId));
    const release = await held;
    const leaves = await Promise.all(
      (await sys.svc.sessions.childKeys(o.childSessionKey)).map(
        async (k) => (await registry(sys).get((await registry(sys).currentRunOf(k))!))!,
      ),
    );
    const fast = leaves.find((r) => r.label === "fastleaf")!;
    const slow = leaves.find((r) => r.label === "slowleaf")!;
    // The fast leaf has left the orchestrator's active runs; its completion turn is not queued.
    expect(await registry(sys).activeCount(o.childSessionKey)).toBe(1);
    expect(await sys.svc.runs.get(announceTurnRunId(fast.childSessionKey, fast.runId))).toBeNull();

    // Worker B announces the slow leaf; the orchestrator answers its completion, whose claim must wait.
    const b = await startPeer(sys.config, { workers: { queues: ["announce"] } });
    onCleanUp(() => b.close());
    const slowTurn = announceTurnRunId(slow.childSessionKey, slow.runId);
    const slowClaim = await settle(
      async () => {
        const job = await sys.svc.queues.announce.getJob(announceJobId(o.childSessionKey, `${slowTurn}.${o.runId}`));
        // Finished as this copy was read (its return value is in the same copy). Not getState()
        // after getJob: a job finishing between the two is "completed" with the copy's null value.
        return job?.finishedOn !== undefined ? job : undefined;
      },
      { what: "the claim of the slow leaf's completion turn", timeoutMs: 15_000 },
    );
    expect(slowClaim!.failedReason).toBeUndefined();
    expect(slowClaim!.returnvalue).toEqual({ done: "deferred" });
    expect(await registry(sys).get(o.runId)).toMatchObject({ announce: "deferred" });

    // A hears Redis again (the held command is sent once more on the new connection: idempotent).
    release();
    const orch = await announced(sys, o.runId);
    await queuesQuiet(sys, 300);
    const answers = (await transcript(sys, o.childSessionKey))
      .filter((m) => m.role === "assistant" && textOf(m).startsWith("ORCH"))
      .map((m) => textOf(m));
    expect(answers).toEqual(["ORCH-SAW-SLOW", "ORCH-SAW-FAST"]);
    expect(orch).toMatchObject({ announce: "delivered", frozenResult: "ORCH-SAW-FAST" });
    const reports = (await announceDeliveries(sys, BOSS)).filter((d) => d.message.includes(o.childSessionKey));
    expect(reports).toHaveLength(1);
    expect(reports[0].message).toContain("ORCH-SAW-FAST");
    expect(await registry(sys).get(fast.runId)).toMatchObject({ status: "ok", announce: "delivered" });
  }, 60_000);
});
