/**
 * Waiting in a chat's delivery lane (docs/concepts/reliability.md, "Replies reach a chat in
 * order"). Only the lane's first member is sent; a delivery behind it waits (its job comes back
 * later, without counting an attempt) and is woken when the one before it settles. A first
 * member whose job is gone would hold the lane for ever, so one not seen for
 * `workers.deliveryOrphanAfterMs` is looked up, and passed when its job no longer exists or
 * ended without settling it.
 */
import { Job } from "bullmq";
import { retryLater } from "../queues/retry-later.js";
import { deliveryCounted } from "../metrics/index.js";
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { QueueName } from "../queues/queue-names.js";
import type { DeliveryLog, LaneMember } from "./delivery-log.js";

/** Thrown by an attempt that must wait behind an earlier delivery to the same chat. */
export class DeliveryLaneWait extends Error {
  constructor(
    /** The delivery waiting (in lane `laneId`). */
    readonly self: string,
    readonly laneId: string,
    /** The one it waits for. */
    readonly behind: string,
  ) {
    super(`delivery ${self} waits for delivery ${behind} to the same chat`);
    this.name = "DeliveryLaneWait";
  }
}

/**
 * How long a waiting delivery's job stays away before it looks again, after `waits` earlier
 * waits: 0.5 s doubling to 5 s. It is normally woken sooner, by the delivery before it settling;
 * the delay only bounds a wake-up that was missed (the one before settled while this job was
 * between its look and its move to delayed).
 */
export function laneRecheckMs(waits: number): number {
  return Math.min(500 * 2 ** Math.max(0, Math.min(waits, 4)), 5000);
}

/** How many times `job` has waited in its lane: the starts that were neither attempts nor this one. */
function laneWaits(job: Job): number {
  return Math.max(0, (job.attemptsStarted ?? 0) - job.attemptsMade - 1);
}

/**
 * `job` waits behind `wait.behind`: back later (laneRecheckMs), no attempt counted. Its first wait
 * is written to the job's log, so an operator in Bull Board sees why a delayed delivery waits.
 */
export async function waitInLane(job: Job, token: string | undefined, wait: DeliveryLaneWait): Promise<never> {
  const waits = laneWaits(job);
  deliveryCounted("waiting");
  if (waits === 0)
    await job.log(`waiting for delivery ${wait.behind}, queued before it to the same chat, to be settled`);
  return await retryLater(job, token, laneRecheckMs(waits));
}

/** Lane members passed in one attempt at most (each a job read); past it the attempt waits. */
const MAX_PASSED = 10;

/**
 * Returns when `self` may be sent: nothing before it in lane `laneId`, or what was before it had
 * a job that is gone (passed, settled `failed`). Throws DeliveryLaneWait otherwise.
 */
export async function awaitLaneTurn(
  svc: { config: Config; queues: Queues },
  log: DeliveryLog,
  laneId: string,
  self: string,
  behind: LaneMember | null,
): Promise<void> {
  for (let passed = 0; behind && behind.id !== self; passed++) {
    const unseenFor = Date.now() - behind.seenAt;
    if (passed >= MAX_PASSED || unseenFor < svc.config.workers.deliveryOrphanAfterMs)
      throw new DeliveryLaneWait(self, laneId, behind.id);
    if (await ownerAlive(svc.queues, behind)) throw new DeliveryLaneWait(self, laneId, behind.id);
    const next = await log.dropFromLane(laneId, behind, "its job ended or was removed before it was delivered");
    if (next === "kept") throw new DeliveryLaneWait(self, laneId, behind.id);
    deliveryCounted("orphaned");
    // Another first member now: wake it, in case it is waiting out a delay (then look at it).
    if (next && next.id !== self) await wakeLaneNext(svc.queues, next);
    behind = next;
  }
}

/**
 * A job that joined a lane with delivery `wait.id` ends without posting it (an announce whose
 * requester went away meanwhile): the delivery, if still pending, is settled with `status` and
 * `reason` and leaves the lane, waking the one after it, instead of holding the chat until the
 * orphan rule passes it.
 */
export async function abandonLaneDelivery(
  svc: { queues: Queues },
  log: DeliveryLog,
  wait: { id: string; laneId: string },
  status: "failed" | "no_route",
  reason: string,
): Promise<void> {
  if ((await log.get(wait.id))?.status !== "pending") return;
  await wakeLaneNext(svc.queues, await log.settle(wait.id, status, reason, wait.laneId));
}

/** Wake the job of `next`, the lane's new first member, if it is waiting out a delay. */
export async function wakeLaneNext(queues: Queues, next: LaneMember | null): Promise<void> {
  if (!next) return;
  const queue = queues[next.owner.queue as QueueName];
  if (!queue || !next.owner.jobId) return;
  try {
    const job = await Job.fromId(queue, next.owner.jobId);
    // Only a delayed job can be promoted; one waiting or running finds itself first anyway.
    if (job && (await job.isDelayed())) await job.promote();
  } catch {
    // Promoted or started meanwhile, or Redis failed: its own delay brings it back.
  }
}

/**
 * Whether the job sending `member` may still settle it: it exists and has not ended. A job that
 * completed or failed without settling its delivery (killed between the two) never will.
 */
async function ownerAlive(queues: Queues, member: LaneMember): Promise<boolean> {
  const queue = queues[member.owner.queue as QueueName];
  if (!queue || !member.owner.jobId) return false;
  const job = await Job.fromId(queue, member.owner.jobId);
  if (!job) return false;
  const state = await job.getState();
  return state !== "completed" && state !== "failed" && state !== "unknown";
}
