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
    /** The delivery it waits for. */
    readonly behind: string,
  ) {
    super(`waiting for delivery ${behind} to the same chat`);
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

/** How many times a `deliver` job has waited in its lane: the starts that were neither attempts nor this one. */
export function laneWaits(job: Job): number {
  return Math.max(0, (job.attemptsStarted ?? 0) - job.attemptsMade - 1);
}

/**
 * `job` waits behind `wait.behind` for the `waits`-th time (0: the first): back later
 * (laneRecheckMs), no attempt counted. The first wait is counted (`waiting`) and written to the
 * job's log, so an operator in Bull Board sees why a delayed delivery waits.
 */
export async function waitInLane(
  job: Job,
  token: string | undefined,
  wait: DeliveryLaneWait,
  waits: number,
): Promise<never> {
  if (waits === 0) {
    deliveryCounted("waiting");
    await job.log(`waiting for delivery ${wait.behind}, queued before it to the same chat, to be settled`);
  }
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
      throw new DeliveryLaneWait(behind.id);
    if (await ownerAlive(svc.queues, behind)) throw new DeliveryLaneWait(behind.id);
    const res = await log.dropFromLane(laneId, behind, "its job ended or was removed before it was delivered");
    if (res === "kept") throw new DeliveryLaneWait(behind.id);
    // Counted by the one delivery that took it out (others behind it may try the same).
    if (res.dropped) deliveryCounted("orphaned");
    // Another first member now: wake it, in case it is waiting out a delay (then look at it).
    if (res.next && res.next.id !== self) await wakeLaneNext(svc.queues, res.next);
    behind = res.next;
  }
}

/**
 * A job that may have put delivery `id` in a chat's lane ends without posting it (an announce
 * whose requester went away meanwhile, or that gives up): the delivery, if still pending, is
 * settled with `status` and `reason` and leaves whatever lane its record names, waking the one
 * after it, instead of holding the chat until the orphan rule passes it. Nothing when it was
 * delivered or settled already.
 */
export async function abandonDelivery(
  svc: { queues: Queues },
  log: DeliveryLog,
  id: string,
  status: "failed" | "no_route",
  reason: string,
): Promise<void> {
  const { settled, next } = await log.settleIfPending(id, status, reason);
  if (!settled) return;
  deliveryCounted(status);
  await wakeLaneNext(svc.queues, next);
}

/** Wake the job of `next`, the lane's new first member, if it is waiting out a delay. */
export async function wakeLaneNext(queues: Queues, next: LaneMember | null): Promise<void> {
  if (!next) return;
  const queue = queues[next.owner.queue as QueueName];
  if (!queue || !next.owner.jobId) return;
  try {
    // Only a delayed job can be promoted (BullMQ refuses any other): one waiting or running
    // finds itself first anyway.
    await (await Job.fromId(queue, next.owner.jobId))?.promote();
  } catch {
    // Not delayed, promoted or started meanwhile, or Redis failed: its own delay brings it back.
  }
}

/**
 * Whether the job sending `member` may still settle it: it exists and has not ended. A job that
 * completed or failed without settling its delivery (killed between the two) never will.
 */
async function ownerAlive(queues: Queues, member: LaneMember): Promise<boolean> {
  const queue = queues[member.owner.queue as QueueName];
  if (!queue || !member.owner.jobId) return false;
  // The state alone (one round trip; "unknown": no such job), not the job and its message.
  const state = await queue.getJobState(member.owner.jobId);
  return state !== "completed" && state !== "failed" && state !== "unknown";
}
