/**
 * Come back to this job later, without it counting as a failed attempt: BullMQ's manual delay
 * (`moveToDelayed` with the job's lock token, then a `DelayedError` so the worker leaves the
 * job where it is). Used by every processor that waits for something (a lease, a run to end).
 */
import { DelayedError, type Job } from "bullmq";

export async function retryLater(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + Math.max(0, delayMs), token);
  throw new DelayedError();
}
