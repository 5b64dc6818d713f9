/**
 * The `drain` job of the runs queue: "session S has turns waiting". Producers push the turn to
 * S's inbox, then add a drain job deduplicated by S with `keepLastIfActive` — so there is at
 * most one drain of S active, plus one follow-up stored when a turn arrives mid-drain (BullMQ
 * re-creates it when the active one finishes). That closes the lost-wake-up window: a turn
 * pushed after the drainer's last empty take still gets a drainer.
 *
 * The lease (with fencing) is the second guard: if BullMQ ever runs two drains of S at once (a
 * stalled-but-alive worker), only the lease holder takes turns, and a holder that lost its lease
 * cannot write. See docs/design/runs.md.
 */
import { DelayedError, type Job } from "bullmq";
import type { Services } from "../app/services.js";
import { StaleFenceError } from "../errors/index.js";
import type { TurnExecutor } from "./turn-executor.js";
import { requestDrain, type DrainData } from "../runs/enqueue.js";

/** Turns per drain job before it yields its worker slot to other sessions (fairness). */
export const MAX_TURNS_PER_DRAIN = 20;
/** A drain that keeps finding the lease held gives up after this many delays (then retries). */
const MAX_LEASE_WAITS = 2000;
/** Failures of one turn outside its runtime before it is finished as an error. */
const MAX_TURN_INFRA_FAILURES = 5;
/** Re-check a held lease this often: short holders (an archive job) finish in milliseconds, and
 *  a crashed holder's lease expires by itself; waiting out the whole TTL would add seconds. */
const LEASE_POLL_MS = 250;

export interface DrainResult {
  ran: number;
  runs: string[];
}

export function createDrainProcessor(svc: Services, executor: TurnExecutor) {
  return async (job: Job<DrainData>, token?: string): Promise<DrainResult> => {
    const { sessionKey } = job.data;
    const acquired = await svc.leases.tryAcquire(sessionKey);
    if (!acquired.acquired) {
      // Another holder is still inside its lease (or a crashed one has not expired yet).
      const waits = (job.data.leaseWaits ?? 0) + 1;
      if (waits > MAX_LEASE_WAITS) throw new Error(`session ${sessionKey} lease stayed busy through ${MAX_LEASE_WAITS} waits`);
      await job.updateData({ ...job.data, leaseWaits: waits });
      await job.moveToDelayed(Date.now() + Math.min(acquired.retryInMs + 20, LEASE_POLL_MS), token);
      throw new DelayedError();
    }
    const lease = acquired.lease;
    const runs: string[] = [];
    try {
      while (runs.length < MAX_TURNS_PER_DRAIN) {
        if (lease.lost.aborted) throw new StaleFenceError(sessionKey, lease.token, null);
        const turn = await svc.inbox.take(lease);
        if (!turn) break;
        let status: string;
        try {
          status = (await executor.execute(turn, lease)).status;
        } catch (err) {
          if (err instanceof StaleFenceError) throw err;
          // A turn that fails outside its runtime every time (storage full, permissions) would
          // hold the in-flight slot forever and block every later turn of the session. After a
          // few tries it is finished as an error (fenced: frees the slot, tells its waiters).
          const failures = await svc.redis.hincrby(svc.keys.run(turn.runId), "infraFailures", 1);
          if (failures < MAX_TURN_INFRA_FAILURES) throw err;
          await svc.runs.finish(lease, turn.runId, "error", { error: `gave up after ${failures} failures: ${(err as Error).message}` });
          status = "error";
        }
        runs.push(`${turn.runId}:${status}`);
      }
    } finally {
      await lease.release().catch(() => false);
    }
    // Yielded with work left: chain another drain (stored as the dedup follow-up while we are active).
    if (runs.length >= MAX_TURNS_PER_DRAIN && (await svc.inbox.depth(sessionKey)) > 0) await requestDrain(svc, sessionKey);
    return { ran: runs.length, runs };
  };
}
