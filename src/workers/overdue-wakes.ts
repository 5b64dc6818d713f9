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
 *
 * The same check promotes drain jobs delayed further ahead than Switchboard ever delays one
 * (`promoteRunawayDrains`): BullMQ dates a delay on the clock of the process that asks for it,
 * so a worker whose clock ran ahead parked them that far into the future, and while one waits
 * its session's deduplicated drain job takes no new one: its next messages would wait too.
 */
import { Job } from "bullmq";
import type { Config } from "../config/schema.js";
import { drainQueueOf, JOBS } from "../queues/jobs.js";
import type { QueueName } from "../queues/queue-names.js";
import { requestDrain } from "../runs/enqueue.js";
import type { PendingWake } from "../runs/pending-wakes.js";
import { storageRetryDelayMs } from "../runs/turn-failure.js";
import { leasePollMs } from "./drain.js";
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
 * `now` is Redis's clock (the wakes' scores are), read when not given. Then promote the drain
 * jobs a clock ahead of Redis's delayed too far (`promoteRunawayDrains`).
 */
export async function rearmOverdueWakes(svc: WorkerDeps, overdueMs: number, now?: number): Promise<number> {
  const seenAt = now ?? (await svc.wakes.now());
  const overdue = await svc.wakes.overdue(overdueMs, svc.config.maintenance.sweepBatch, seenAt);
  // A wake of a paused queue (queue-pauses.ts) waits on purpose: it is marked as seen now, so it
  // is not re-armed into the paused queue, and after the resume its age counts from the last check.
  const paused = await pausedDrainQueues(svc, overdue);
  const held = overdue.filter((w) => paused.has(drainQueueOf(w.sessionKey)));
  for (const w of held) await svc.wakes.touch(w.member, seenAt);
  // A held lease is a drainer on the session (a long drain): its wake is marked as seen now too.
  const rearmed = await rearm(
    svc,
    held.length ? overdue.filter((w) => !paused.has(drainQueueOf(w.sessionKey))) : overdue,
    (w) => svc.wakes.touch(w.member, seenAt),
  );
  if (rearmed)
    svc.log.warn(
      { sessions: rearmed, overdueMs },
      "re-armed drains whose wake-up was not taken in time (lost with a worker or pusher, or workers busy)",
    );
  // Here rather than in the sweep alone: this also runs on each worker's own timer, and the
  // sweep is a delayed job itself, which a worker with a clock ahead schedules just as late.
  await promoteRunawayDrains(svc, seenAt).catch((err: Error) =>
    svc.log.warn({ err: err.message }, "check for drain jobs delayed by a clock ahead of Redis's failed"),
  );
  return rearmed;
}

/** BullMQ scores a delayed job `dueAtMs * 0x1000 + n` (n orders the jobs due in the same ms). */
const DELAYED_SCORE_PER_MS = 0x1000;

/**
 * Added to the longest delay Switchboard asks for before a delayed drain job counts as runaway:
 * it covers the short fixed waits not listed in `maxDrainDelayMs` (a ready-list drain handed on
 * as a job waits 1 s) and a clock a few seconds off, which costs little and doctor reports.
 */
export const RUNAWAY_DELAY_MARGIN_MS = 30_000;

/** The queues drain jobs go to (`JOBS.drain.queue`). */
const DRAIN_QUEUES: readonly QueueName[] = ["runs", "subagents"];

/**
 * The longest delay Switchboard itself gives a drain job: a lease wait, a turn parked on a
 * storage fault (its cap plus jitter), a drain re-armed after it ran out of retries, and
 * BullMQ's backoff before the drain job's last attempt.
 */
export function maxDrainDelayMs(config: Config): number {
  const opts = JOBS.drain.options({ sessionKey: "-" }, config);
  const attempts = opts.attempts ?? 1;
  const backoff = typeof opts.backoff === "number" ? { type: "fixed", delay: opts.backoff } : opts.backoff;
  // BullMQ waits `delay * 2^(n-1)` after the n-th failed attempt (exponential) and retries
  // after attempts 1 to attempts-1; a fixed backoff waits `delay` each time.
  const lastBackoff =
    attempts < 2 || !backoff?.delay
      ? 0
      : backoff.type === "exponential"
        ? backoff.delay * 2 ** (attempts - 2)
        : backoff.delay;
  return Math.max(
    leasePollMs(Number.POSITIVE_INFINITY),
    storageRetryDelayMs(Number.MAX_SAFE_INTEGER, config.storage.faultRetryMaxDelayMs, () => 1),
    config.workers.rearmDrainDelayMs,
    lastBackoff,
  );
}

/**
 * Promote drain jobs due later than `now` (Redis's clock) plus the longest delay Switchboard
 * asks for and a margin: only a process whose clock is ahead of Redis's delays one that far
 * (BullMQ dates a delay on the clock of the process that asks for it, and there is no date
 * that suits both it and the others: src/queues/retry-later.ts). Reads only that end of each
 * drain queue's delayed set (at most `maintenance.sweepBatch` jobs), so with none it costs one
 * range read per queue. Returns how many it promoted; logs a warning naming the skew.
 */
export async function promoteRunawayDrains(svc: WorkerDeps, now?: number): Promise<number> {
  now ??= await svc.wakes.now();
  const boundMs = maxDrainDelayMs(svc.config) + RUNAWAY_DELAY_MARGIN_MS;
  const sessions: string[] = [];
  let clockAheadMs = 0;
  for (const name of DRAIN_QUEUES) {
    const queue = svc.queues[name];
    const found = await svc.redis.zrangebyscore(
      queue.toKey("delayed"),
      (now + boundMs) * DELAYED_SCORE_PER_MS,
      "+inf",
      "WITHSCORES",
      "LIMIT",
      0,
      svc.config.maintenance.sweepBatch,
    );
    for (let i = 0; i + 1 < found.length; i += 2) {
      const job = await Job.fromId(queue, found[i]!);
      if (!job || job.name !== JOBS.drain.name) continue;
      const askedMs = Number(job.delay) || 0; // read first: promote() zeroes it
      // Taken meanwhile (promoted by another check, removed): not delayed any more, nothing to do.
      const promoted = await job.promote().then(
        () => true,
        () => false,
      );
      if (!promoted) continue;
      sessions.push(String((job.data as { sessionKey?: unknown }).sessionKey));
      // Due at its delayer's "now" plus the delay it asked for: the rest is how far ahead that
      // clock was, less the time since (so at least this much).
      const dueAt = Math.floor(Number(found[i + 1]) / DELAYED_SCORE_PER_MS);
      clockAheadMs = Math.max(clockAheadMs, dueAt - now - askedMs);
    }
  }
  if (sessions.length)
    svc.log.warn(
      { promoted: sessions.length, clockAheadMs, boundMs, sessions: sessions.slice(0, 10) },
      `promoted drain jobs delayed beyond any delay Switchboard asks for: the process that delayed them ` +
        `has a clock at least ${Math.round(clockAheadMs / 1000)} s ahead of Redis's (switchboard doctor: clock)`,
    );
  return sessions.length;
}

/** The drain queues of `wakes` that are paused now (none read when there are no wakes). */
async function pausedDrainQueues(svc: WorkerDeps, wakes: PendingWake[]): Promise<Set<QueueName>> {
  const queues = new Set(wakes.map((w) => drainQueueOf(w.sessionKey)));
  const paused = new Set<QueueName>();
  for (const q of queues) if (await svc.queues[q].isPaused()) paused.add(q);
  return paused;
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
    // This add may be absorbed by the session's drain job that is only waiting (a paused queue,
    // busy workers); should an operator remove that job, the session is still in work:sessions,
    // and the stranded-session check re-arms it (stranded-sessions.ts).
    await requestDrain(svc, w.sessionKey);
    await svc.wakes.retire(w.member);
    rearmed++;
  }
  return rearmed;
}
