/**
 * The claim of an orchestrator's report, against a real Redis (subagent-end.lua and
 * subagent-claim.lua through the registry): a leaf's end marks the completion it owes in the same
 * step as it leaves the active runs, only its claim (or a settle, when no completion turn comes)
 * clears it, a retried end never writes it back, and the report is on the newest answer of every
 * claimer, whatever order the claims come in.
 */
import { afterAll, describe, expect, it } from "vitest";
import { SubagentRegistry, type SubagentRun } from "../../src/subagents/registry.js";
import { outcomeOrder } from "../../src/subagents/announce.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import type { RunRecord } from "../../src/runs/run-records.js";
import { newRedis, uniquePrefix } from "../helpers/context.js";

const redis = newRedis();
const keys = new RedisKeys(uniquePrefix("claim"));
const registry = new SubagentRegistry(redis as never, keys);
afterAll(async () => {
  const left = await redis.keys(`${keys.base}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
});

const BOSS = "agent:boss:main";
let n = 0;

function run(requester: string, label: string): SubagentRun {
  n++;
  return {
    runId: `run-${label}-${n}`,
    childSessionKey: `agent:boss:subagent:${label}-${n}`,
    requesterSessionKey: requester,
    task: label,
    cleanup: "keep",
    depth: requester === BOSS ? 1 : 2,
    createdAt: Date.now(),
    status: "running",
    announce: "pending",
  };
}

/** An orchestrator with two leaves, all registered. */
async function tree(): Promise<{ orch: SubagentRun; a: SubagentRun; b: SubagentRun }> {
  const orch = run(BOSS, "orch");
  const a = run(orch.childSessionKey, "a");
  const b = run(orch.childSessionKey, "b");
  for (const r of [orch, a, b]) expect((await registry.register(r, 5)).result).toBe("registered");
  return { orch, a, b };
}

/** A turn's order key: answered (or yielded), ended at `at`. */
const order = (at: number, yielded = false) =>
  outcomeOrder({
    runId: "x",
    sessionKey: "s",
    status: "ok",
    terminalAt: at,
    startedAt: at - 5,
    ...(yielded ? { yielded: "y" } : {}),
  } as RunRecord);

describe("an orchestrator's report claim", () => {
  it("waits for a completion whose turn is not queued yet, even with every leaf ended", async () => {
    const { orch, a, b } = await tree();
    // Its own run yielded: deferred while its leaves run.
    expect(await registry.claimAnnounce(orch, orch.runId, order(1000, true))).toEqual({ result: "deferred" });
    // Leaf a ends: it leaves the active runs, its completion is owed (its push not made yet: a crash here).
    await registry.markEnded(a, "ok", 1100, undefined, "turn-a");
    expect(await registry.activeCount(orch.childSessionKey)).toBe(1);
    // Leaf b ends and its completion turn claims: a's completion is still owed, so it waits.
    await registry.markEnded(b, "ok", 1200, undefined, "turn-b");
    expect(await registry.activeCount(orch.childSessionKey)).toBe(0);
    expect(await registry.claimAnnounce(orch, "turn-b", order(1300), "turn-b")).toEqual({ result: "deferred" });
    // a's announce retried after the crash: its end is seen again, nothing changes.
    await registry.markEnded(a, "ok", 1100, undefined, "turn-a");
    // a's completion turn ran before b's (it was queued first), but its claim comes last: the
    // report is on b's turn's answer, the newest; every claimer's turn is named for the stats.
    const claim = await registry.claimAnnounce(orch, "turn-a", order(1250), "turn-a");
    expect(claim).toMatchObject({ result: "claimed", outcome: "turn-b" });
    expect(claim.result === "claimed" && [...claim.turns].sort()).toEqual([orch.runId, "turn-a", "turn-b"].sort());
    // The same claim retried answers the same; any other is refused.
    expect(await registry.claimAnnounce(orch, "turn-a", order(1250), "turn-a")).toMatchObject({ outcome: "turn-b" });
    expect(await registry.claimAnnounce(orch, orch.runId, order(1000, true))).toEqual({ result: "taken" });
  });

  it("a retried end never writes back a completion its claim has settled", async () => {
    const { orch, a, b } = await tree();
    await registry.markEnded(a, "ok", 1100, undefined, "turn-a");
    expect(await registry.claimAnnounce(orch, "turn-a", order(1200), "turn-a")).toEqual({ result: "deferred" });
    // a's announce job retried after its completion turn claimed (e.g. it died after the push).
    await registry.markEnded(a, "ok", 1100, undefined, "turn-a");
    await registry.markEnded(b, "ok", 1300, undefined, "turn-b");
    expect(await registry.claimAnnounce(orch, "turn-b", order(1400), "turn-b")).toMatchObject({
      result: "claimed",
      outcome: "turn-b",
    });
  });

  it("a leaf that queues no completion turn is settled; the report is on the latest answer, not a yield", async () => {
    const { orch, a, b } = await tree();
    expect(await registry.claimAnnounce(orch, orch.runId, order(1000, true))).toEqual({ result: "deferred" });
    await registry.markEnded(a, "ok", 1100, undefined, "turn-a");
    expect(await registry.claimAnnounce(orch, "turn-a", order(1200), "turn-a")).toEqual({ result: "deferred" });
    // b ends silent (or killed): settled by its own announce; the orchestrator's run claims again.
    await registry.markEnded(b, "ok", 1300, undefined, "turn-b");
    expect(await registry.claimAnnounce(orch, orch.runId, order(1000, true))).toEqual({ result: "deferred" });
    await registry.settleCompletion(orch.childSessionKey, "turn-b", b.runId);
    expect(await registry.claimAnnounce(orch, orch.runId, order(1000, true))).toMatchObject({
      result: "claimed",
      outcome: "turn-a",
    });
  });

  it("orders a turn that answered above any that yielded, then by its end", () => {
    expect(order(1000) > order(9000, true)).toBe(true);
    expect(order(1001) > order(1000)).toBe(true);
    expect(order(10_000) > order(9_999)).toBe(true);
  });
});
