/**
 * Come back to this job later, without it counting as a failed attempt: BullMQ's manual delay
 * (`moveToDelayed` with the job's lock token, then a `DelayedError` so the worker leaves the
 * job where it is). Used by every processor that waits for something (a lease, a run to end).
 *
 * The due time is on this process's clock, not Redis's, on purpose. BullMQ promotes a delayed
 * job when the clock of the worker fetching jobs passes it, so a date on Redis's clock from a
 * worker whose clock runs ahead would be due at once for that worker: it would fetch the job
 * again straight away, in a loop without any pause (lease waits, storage retries). On its own
 * clock it waits the delay, and its dates only look far off to the others, which the overdue
 * check repairs (promoteRunawayDrains, src/workers/overdue-wakes.ts).
 */
import { DelayedError, type Job } from "bullmq";

export async function retryLater(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + Math.max(0, delayMs), token);
  throw new DelayedError();
}
