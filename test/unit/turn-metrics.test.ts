/**
 * switchboard_redeliveries_total means a worker crashed or stalled, or a turn was handed back:
 * a later attempt of a turn that had not finished. A turn parked on a storage fault is begun
 * again by design (its record keeps `stalledReason`, and `parkedAttempt` says which attempt
 * parked): that is not a redelivery, but a crash of the attempt that resumed it is.
 */
import { describe, expect, it } from "vitest";
import { processRegistry, turnStarted } from "../../src/metrics/index.js";
import type { BegunTurn } from "../../src/runs/inbox.js";
import type { RunRecord } from "../../src/runs/run-records.js";

/** A counter's value, or a histogram's `_count` (by the histogram's name). */
async function count(name: string): Promise<number> {
  const metric = processRegistry().getSingleMetric(name);
  const values = ((await metric?.get())?.values ?? []) as { value: number; metricName?: string }[];
  const own = values.filter((v) => !v.metricName || v.metricName === name || v.metricName === `${name}_count`);
  return own.reduce((n, v) => n + v.value, 0);
}

function begun(record: Partial<RunRecord> | null): BegunTurn {
  const turn = {
    runId: "r1",
    sessionKey: "agent:main:x",
    agentId: "main",
    sessionId: "s1",
    text: "hi",
    step: "turn",
    provenance: "user",
    messageTs: 0,
    enqueuedAt: Date.now() - 100,
  } as BegunTurn["turn"];
  return {
    turn,
    record: record && { runId: "r1", sessionKey: turn.sessionKey, status: "running", ...record },
    entry: null,
  };
}

describe("turnStarted", () => {
  it("counts a later attempt of an unfinished turn as a redelivery, not a parked one", async () => {
    const redeliveries = () => count("switchboard_redeliveries_total");
    const waits = () => count("switchboard_queue_wait_seconds");
    const start = { redeliveries: await redeliveries(), waits: await waits() };

    turnStarted(begun({ attempts: 1 }));
    expect(await waits()).toBe(start.waits + 1);
    expect(await redeliveries()).toBe(start.redeliveries);

    // A crash, a stall or a hand-back: the record says nothing of a storage fault.
    turnStarted(begun({ attempts: 2 }));
    expect(await redeliveries()).toBe(start.redeliveries + 1);

    // Parked on a storage fault and retried (twice): storage_faults_total's, not a redelivery.
    const parked = { stalledReason: "transcript storage unavailable (ENOSPC: no space left on device)" };
    turnStarted(begun({ attempts: 2, ...parked }));
    turnStarted(begun({ attempts: 3, ...parked }));
    expect(await redeliveries()).toBe(start.redeliveries + 1);
    // Neither is a first attempt: no queue wait observed for them.
    expect(await waits()).toBe(start.waits + 1);
  });

  it("counts a parked run resumed and then lost to a crash once", async () => {
    const redeliveries = () => count("switchboard_redeliveries_total");
    const start = await redeliveries();
    const stalledReason = "transcript storage unavailable (ENOTDIR: not a directory)";
    // Attempt 1 parked; attempt 2 resumes it (a park's retry, not a redelivery) and dies with its worker.
    turnStarted(begun({ attempts: 2, stalledReason, parkedAttempt: 1 }));
    expect(await redeliveries()).toBe(start);
    // Attempt 3 follows the crash: the record still says the run was parked once, but not by attempt 2.
    turnStarted(begun({ attempts: 3, stalledReason, parkedAttempt: 1 }));
    expect(await redeliveries()).toBe(start + 1);
    // Attempt 3 parked too: attempt 4 is its retry.
    turnStarted(begun({ attempts: 4, stalledReason, parkedAttempt: 3 }));
    expect(await redeliveries()).toBe(start + 1);
  });
});
