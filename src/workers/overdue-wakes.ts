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
import type { PendingWake } from "../runs/pending-wakes.js";
import type { WorkerDeps } from "./worker-deps.js";

/** Longest a pending wake may wait before it is re-armed: 10 s, or the lease TTL if shorter. */
export function wakeOverdueMs(config: Pick<Config, "workers">): number {
  return Math.min(10_000, config.workers.lockDurationMs);
}

/** A ready list longer than this is not read to look for lost pops (the overdue check covers them). */
const MAX_READY_SCAN = 10_000;

/**
 * Re-arm the wakes a lost pop may have taken: pending, not on the ready list, and no drainer
 * holds their session's lease. A consumer runs it when its connection is back after a drop: a
 * BLPOP or LPOP under way then may have taken wakes whose answer was lost with the connection
 * (the client sends the pop again and waits for another). Without it they wait to be overdue.
 * A wake taken a moment ago by a consumer whose drain has not taken the lease yet looks the same;
 * it gets a drain job too, which finds the lease held or the inbox empty: an empty drain at most,
 * as for the overdue check. So do wakes waiting for their drain job (it is deduplicated).
 * Returns how many got a drain job; none when the ready list is too long to read.
 */
export async function rearmLostPops(svc: WorkerDeps): Promise<number> {
  const pending = await svc.wakes.oldest(svc.config.maintenance.sweepBatch);
  if (pending.length === 0) return 0;
  const readied = await svc.wakes.readied(MAX_READY_SCAN);
  if (!readied) return 0;
  const rearmed = await rearm(
    svc,
    pending.filter((w) => !readied.has(w.member)),
    async () => undefined,
  );
  if (rearmed)
    svc.log.warn({ sessions: rearmed }, "re-armed drains whose wake-up a pop may have lost with its connection");
  return rearmed;
}

/**
 * Re-arm the overdue wakes (at most `maintenance.sweepBatch`); returns how many got a drain job.
 * `now` is Redis's clock (the wakes' scores are), read when not given.
 */
export async function rearmOverdueWakes(svc: WorkerDeps, overdueMs: number, now?: number): Promise<number> {
  now ??= await svc.wakes.now();
  const overdue = await svc.wakes.overdue(overdueMs, svc.config.maintenance.sweepBatch, now);
  // A held lease is a drainer on the session (a long drain): its wake is marked as seen now.
  const rearmed = await rearm(svc, overdue, (w) => svc.wakes.touch(w.member, now));
  if (rearmed)
    svc.log.warn(
      { sessions: rearmed, overdueMs },
      "re-armed drains whose wake-up was not taken in time (lost with a worker or pusher, or workers busy)",
    );
  return rearmed;
}

/**
 * The re-arm itself, shared by both checks: a wake whose session lease is held has a drainer
 * (`whenHeld` decides what that means); any other gets a drain job and is retired (from the
 * ready list too). Returns how many got a drain job.
 */
async function rearm(
  svc: WorkerDeps,
  wakes: PendingWake[],
  whenHeld: (w: PendingWake) => Promise<void>,
): Promise<number> {
  let rearmed = 0;
  for (const w of wakes) {
    if ((await svc.redis.exists(svc.keys.lease(w.sessionKey))) === 1) {
      await whenHeld(w);
      continue;
    }
    await requestDrain(svc, w.sessionKey);
    await svc.wakes.retire(w.member);
    rearmed++;
  }
  return rearmed;
}
