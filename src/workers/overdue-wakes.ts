/**
 * The safety net under every wake-up (docs/design/runs.md, "Wake-ups"). A pending wake is
 * recorded by the push that finds a session idle, in the same script, and lives until a drainer
 * has the session: a drain job clears it when it takes the turn, a ready-list drain when it ends.
 * One still there after `wakeOverdueMs` means one of:
 *  - its pusher died before adding the drain job (`workers.wake: "drain-job"`);
 *  - a worker popped it from the ready list and died (before or during the drain);
 *  - every worker has been busy since (the session still waits on the ready list or queue);
 *  - a ready-list drain is still running (long turns, or a busy session).
 * The last case holds the session lease, so its wake is only marked as seen. In the others a
 * drain job is added; it is deduplicated per session, and a drainer arriving second finds the
 * inbox empty or the lease held, so a wake that was not lost costs an empty drain at most.
 */
import type { Config } from "../config/schema.js";
import { requestDrain } from "../runs/enqueue.js";
import type { WorkerDeps } from "./worker-deps.js";

/** Longest a pending wake may wait before it is re-armed: 10 s, or the lease TTL if shorter. */
export function wakeOverdueMs(config: Pick<Config, "workers">): number {
  return Math.min(10_000, config.workers.lockDurationMs);
}

/** Re-arm the overdue wakes (at most `maintenance.sweepBatch`); returns how many got a drain job. */
export async function rearmOverdueWakes(svc: WorkerDeps, overdueMs: number, now = Date.now()): Promise<number> {
  const overdue = await svc.wakes.overdue(overdueMs, svc.config.maintenance.sweepBatch, now);
  let rearmed = 0;
  for (const w of overdue) {
    if ((await svc.redis.exists(svc.keys.lease(w.sessionKey))) === 1) {
      await svc.wakes.touch(w.member, now);
      continue;
    }
    await requestDrain(svc, w.sessionKey);
    await svc.wakes.retire(w.member);
    rearmed++;
  }
  if (rearmed)
    svc.log.warn(
      { sessions: rearmed, overdueMs },
      "re-armed drains whose wake-up was not taken in time (lost with a worker or pusher, or workers busy)",
    );
  return rearmed;
}
