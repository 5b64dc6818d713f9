/**
 * The `deliver` job: one outbound message to one channel. Retried with exponential backoff by
 * BullMQ; the delivery record shows every attempt and the final outcome. A message whose
 * session is denied by sendPolicy is recorded as `blocked` and never sent.
 */
import type { Job } from "bullmq";
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { SessionStore } from "../storage/session-store.js";
import { DeliveryLog, sendThroughChannel } from "./index.js";
import type { DeliveryOwner, NewDeliveryRecord } from "./delivery-log.js";
import { deliveryLaneId } from "./lane-id.js";
import { awaitLaneTurn, DeliveryLaneWait, laneWaits, waitInLane, wakeLaneNext } from "./delivery-lane.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { deliveryCounted } from "../metrics/index.js";
import { addJob, jobData, type DeliverData } from "../queues/jobs.js";
import { jobIdPart, type QueueName } from "../queues/queue-names.js";
import type { SessionEntry } from "../session/session-entry.js";

export type { DeliverData } from "../queues/jobs.js";

/**
 * What queueing and sending a delivery reads and writes: the channels in the config, the log, the send policy's entry.
 */
export interface DeliveryDeps {
  config: Config;
  redis: RedisClient;
  keys: RedisKeys;
  sessions: SessionStore;
  queues: Queues;
}

export function createDeliverProcessor(svc: DeliveryDeps) {
  return async (job: Job, token?: string): Promise<{ status: string }> => {
    try {
      return await deliverOnce(svc, jobData("deliver", job), deliveryAttemptOf(job, "delivery"));
    } catch (err) {
      if (err instanceof DeliveryLaneWait) return await waitInLane(job, token, err, laneWaits(job));
      throw err;
    }
  };
}

/** One attempt of the job sending a delivery: whether it is its last, and which job it is. */
export interface DeliveryAttempt {
  last: boolean;
  owner: DeliveryOwner;
  /** The job was retried after it failed for good (Bull Board's retry): a failed delivery is tried again. */
  retried: boolean;
}

/** The attempt `job` (of queue `queue`) is making now. */
export function deliveryAttemptOf(job: Job, queue: QueueName): DeliveryAttempt {
  const attempts = job.opts.attempts ?? 1;
  return {
    last: job.attemptsMade + 1 >= attempts,
    owner: { queue, jobId: job.id ?? "" },
    retried: job.attemptsMade >= attempts,
  };
}

/**
 * One attempt at one outbound message, recorded in the delivery log, inside whatever job
 * retries it (`attempt.owner`): the `deliver` job, or the sub-agent announce job (which posts
 * itself, so that a channel that keeps failing fails the announce). A message the log already
 * shows delivered is not sent again. Throws when the channel fails; the record turns `failed` on
 * `attempt.last`. Throws DeliveryLaneWait while an earlier message to the same chat is not
 * settled: the caller's job comes back later (docs/concepts/reliability.md, "Replies reach a chat
 * in order").
 */
export async function deliverOnce(
  svc: DeliveryDeps,
  d: DeliverData,
  attempt: DeliveryAttempt,
): Promise<{ status: string }> {
  const log = new DeliveryLog(svc.redis, svc.keys);
  const channel = svc.config.channels[d.route.channel];
  const laneId = deliveryLaneId(channel, d.route);
  const begun = await log.begin(
    newRecord(d),
    laneId ? { id: laneId, owner: attempt.owner } : undefined,
    attempt.retried,
  );
  if (begun.status === "delivered") return { status: "delivered" };
  // Its last attempt was recorded and then its worker died: it failed for good, as recorded.
  if (begun.status === "failed") throw new Error(`delivery failed for good: ${begun.error}`);
  const entry = await svc.sessions.get(d.sessionKey);
  // Decided for where the message goes: a rule on a channel holds for any session sending there.
  const policy = sessionSendPolicy(svc.config, d.sessionKey, entry, policyPlace(d));
  if (policy === "deny") {
    await wakeLaneNext(svc.queues, await log.settle(d.id, "blocked", "send blocked by session policy", laneId));
    deliveryCounted("blocked");
    return { status: "blocked" };
  }
  if (!channel) {
    await log.settle(d.id, "no_route", `no adapter configured for channel ${d.route.channel}`);
    deliveryCounted("no_route");
    return { status: "no_route" };
  }
  if (laneId) await awaitLaneTurn(svc, log, laneId, d.id, begun.behind);
  try {
    await sendThroughChannel(channel, {
      id: d.id,
      message: d.message,
      sessionKey: d.sessionKey,
      kind: d.kind,
      ...d.route,
    });
  } catch (err) {
    const next = await log.attempt(d.id, attempt.last ? "failed" : "pending", (err as Error).message, laneId);
    await wakeLaneNext(svc.queues, next);
    deliveryCounted(attempt.last ? "failed" : "retry");
    throw err;
  }
  await wakeLaneNext(svc.queues, await log.attempt(d.id, "delivered", undefined, laneId));
  deliveryCounted("delivered");
  return { status: "delivered" };
}

function newRecord(d: DeliverData): NewDeliveryRecord {
  return { id: d.id, sessionKey: d.sessionKey, kind: d.kind, message: d.message, ...d.route };
}

/** Where a delivery goes, for sendPolicy rules: its channel, and its chat type when known. */
function policyPlace(d: DeliverData): { channel: string; chatType?: string } {
  return { channel: d.route.channel, ...(d.chatType ? { chatType: d.chatType } : {}) };
}

/**
 * What a delivery comes to without any attempt: `blocked` (sendPolicy deny, decided on the
 * session `entry` and the channel it goes to) or `no_route` (no adapter for its channel), else null (it must be sent).
 * The same decisions, in the same order, as `deliverOnce`.
 */
function settledWithoutSending(
  config: Config,
  d: DeliverData,
  entry: SessionEntry | null,
): { status: "blocked" | "no_route"; error: string } | null {
  if (sessionSendPolicy(config, d.sessionKey, entry, policyPlace(d)) === "deny")
    return { status: "blocked", error: "send blocked by session policy" };
  if (!config.channels[d.route.channel])
    return { status: "no_route", error: `no adapter configured for channel ${d.route.channel}` };
  return null;
}

/**
 * Queue a delivery, or, when nothing is to be sent (no adapter for its channel, or the session's
 * sendPolicy denies it: decided on `entry`, the session entry the caller holds), record its
 * outcome at once in one round trip: a job that can only write that record is skipped. The
 * record is the same either way (`GET /v1/deliveries`), and writing it again is harmless.
 */
export async function enqueueOrSettleDelivery(
  svc: Pick<DeliveryDeps, "queues" | "config" | "redis" | "keys">,
  data: DeliverData,
  entry: SessionEntry | null,
): Promise<void> {
  const settled = settledWithoutSending(svc.config, data, entry);
  if (!settled) return await enqueueDelivery(svc, data);
  await new DeliveryLog(svc.redis, svc.keys).open(newRecord(data), settled);
  deliveryCounted(settled.status);
}

/**
 * Queue an outbound message (reply, announce or explicit `send`) with retries. One to a chat
 * (a channel that sends) joins the chat's lane as it is queued, so messages queued one after the
 * other are sent in that order whatever their retries.
 */
export async function enqueueDelivery(
  svc: Pick<DeliveryDeps, "queues" | "config" | "redis" | "keys">,
  data: DeliverData,
): Promise<void> {
  const laneId = deliveryLaneId(svc.config.channels[data.route.channel], data.route);
  if (!laneId) {
    await addJob(svc, "deliver", data);
    return;
  }
  // The job first: a lane member then always has a job, so one behind it never takes a job still
  // being added for a lost one. A job that runs before the join joins at its first attempt, which
  // is still before anything this producer queues next.
  await addJob(svc, "deliver", data);
  const owner = { queue: "delivery", jobId: jobIdPart(data.id) };
  await new DeliveryLog(svc.redis, svc.keys).open(newRecord(data), undefined, { id: laneId, owner });
}

/** What a `send` answers about its delivery (README "HTTP API"). */
export interface SendOutcome {
  /** `queued` (waiting or between retries), `active` (being sent now), or the recorded outcome. */
  status: "queued" | "active" | "delivered" | "blocked" | "no_route";
  /** The same send was made before: this is its delivery, not a new one. */
  duplicate?: true;
  /** The earlier delivery had failed for good: it is tried again, with all its attempts. */
  retried?: true;
}

/**
 * Queue a send whose id is fixed by its idempotency key, and say what became of it. BullMQ
 * ignores an add whose job id it still holds, also in its failed set (kept 7 days), so a resend
 * after the channel recovered would answer `queued` and never send: a failed delivery is retried
 * instead (its record back to `pending`), and one queued, in flight or settled answers as it is.
 */
export async function enqueueOrResumeDelivery(
  svc: Pick<DeliveryDeps, "queues" | "config" | "redis" | "keys">,
  data: DeliverData,
): Promise<SendOutcome> {
  const log = new DeliveryLog(svc.redis, svc.keys);
  // A concurrent resend may move the job between our read and our retry: look again.
  for (let tries = 0; ; tries++) {
    const job = await svc.queues.delivery.getJob(jobIdPart(data.id));
    const rec = await log.get(data.id);
    if (!job) {
      // Completed jobs go after a day, failed ones after 7 (the record stays 30): a settled
      // record is the answer; a failed one (or none) is queued again.
      if (rec && rec.status !== "failed" && rec.status !== "pending") return { status: rec.status, duplicate: true };
      if (rec?.status === "failed") await log.setStatus(data.id, "pending");
      await enqueueDelivery(svc, data);
      return rec?.status === "failed" ? { status: "queued", retried: true } : { status: "queued" };
    }
    const state = await job.getState();
    if (state === "failed") {
      // Pending before the retry: once retried, the worker may record `delivered` at once. And
      // back in its chat's lane, behind what was queued for that chat meanwhile.
      await log.setStatus(data.id, "pending");
      const laneId = deliveryLaneId(svc.config.channels[data.route.channel], data.route);
      if (laneId)
        await log.open(newRecord(data), undefined, { id: laneId, owner: { queue: "delivery", jobId: job.id ?? "" } });
      try {
        await job.retry("failed", { resetAttemptsMade: true, resetAttemptsStarted: true });
        return { status: "queued", retried: true };
      } catch (err) {
        if (tries >= 2) {
          if ((await job.getState()) === "failed") await log.setStatus(data.id, "failed");
          throw err;
        }
        continue;
      }
    }
    if (state === "completed" && rec && rec.status !== "pending" && rec.status !== "failed")
      return { status: rec.status, duplicate: true };
    if (state === "active") return { status: "active", duplicate: true };
    return { status: "queued", duplicate: true };
  }
}
