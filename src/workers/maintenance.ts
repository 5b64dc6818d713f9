/**
 * Maintenance queue:
 *  - `sweep` (a Job Scheduler, every `maintenance.sweepEveryMs`): rotates sessions that went
 *    stale (daily boundary or idle expiry) without waiting for their next message. It reads
 *    only the stale index entries that are due, so it costs O(stale sessions), not O(all).
 *    The lazy check on the next message stays; a compare-and-set makes sure a session that
 *    both paths see stale is rotated once.
 *    The same job re-arms overdue wakes and sessions left with turns and no drainer (a drain job
 *    removed in Bull Board: src/workers/stranded-sessions.ts), and finishes what a crash cut off:
 *    `/stop`s, archives of retired transcripts, sub-agent runs whose turn was never queued and
 *    releases of sub-agent requesters (src/subagents/unqueued.ts).
 *  - `prune` (its own Job Scheduler while `session.maintenance` is set): src/workers/session-prune.ts.
 *  - `archive`: renames an old transcript to `.reset.<ts>`/`.deleted.<ts>` while holding the
 *    session lease, so it never races a turn still writing to it.
 */
import { retryLater } from "../queues/retry-later.js";
import type { Job } from "bullmq";
import { topicOpt } from "../session/transcript-topic.js";
import { rearmOverdueWakes, wakeOverdueMs } from "./overdue-wakes.js";
import { repairStrandedSessions } from "./stranded-sessions.js";
import { requeueStopped } from "../runs/stop.js";
import type { WorkerDeps } from "./worker-deps.js";
import { entryStaleAt, freshnessOf } from "../session/entry-freshness.js";
import { archiveDone, requeuePendingArchives } from "../rotation/pending-archives.js";
import { dropCutOffRuns, releaseOwed } from "../subagents/unqueued.js";
import { rotateSession } from "../rotation/rotate.js";
import { JOBS, jobData } from "../queues/jobs.js";
import { identOf } from "../session/session-ident.js";
import { SessionLeases } from "../runs/session-lease.js";
import { pruneDue } from "./session-prune.js";
import { classifyTurnFailure } from "../runs/turn-failure.js";

export const SWEEP_SCHEDULER_ID = "session-sweep";

/**
 * TTL of the session lease the archive job holds (renewed while it works). A drain that finds
 * the lease taken waits out its remaining TTL, so a lease taken for a millisecond rename with
 * the turn TTL (`workers.lockDurationMs`, 30 s by default) could hold up a reply that long.
 */
const ARCHIVE_LEASE_TTL_MS = 1000;
/** How long a stale session found busy waits before a sweep looks at it again. */
export const SWEEP_BUSY_RETRY_MS = 60_000;

/**
 * How often an archive job waiting for a busy session looks again. Not the holder's remaining
 * TTL: a drain renews a 30 s lease and lets go as soon as its turns are done.
 */
const ARCHIVE_LEASE_POLL_MS = 1000;

export interface SweepResult {
  examined: number;
  rotated: number;
  rescheduled: number;
  /** Stale but with turns queued or running: left for a later sweep (or the next message). */
  busy: number;
}

export async function sweepOnce(svc: WorkerDeps, now = Date.now()): Promise<SweepResult> {
  const due = await svc.sessions.dueStale(now, svc.config.maintenance.sweepBatch);
  const result: SweepResult = { examined: due.length, rotated: 0, rescheduled: 0, busy: 0 };
  for (const key of due) {
    const entry = await svc.sessions.get(key);
    if (!entry) continue;
    const f = freshnessOf(svc.config, entry, now);
    if (f.fresh) {
      // Policy changed or the session was touched after it was indexed: index its new instant.
      await svc.sessions.upsert(
        key,
        identOf(svc.config, key),
        {},
        { activity: "preserve", staleAt: entryStaleAt(svc.config, entry) },
      );
      result.rescheduled++;
      continue;
    }
    // Turns still queued or running carry the old sessionId: rotating under them would let them
    // write (and reply) into the retired session after its archive. So the rotation is refused,
    // atomically, unless the session is idle and unchanged since it was read; a busy one stays
    // due and a later sweep looks again once it is quiet.
    const rotated = await rotateSession(svc, entry, {
      reason: f.staleReason ?? "daily",
      now,
      archive: "job",
      activity: "preserve",
      onlyIfUntouchedAndIdle: true,
      // A muted session stays muted: a message to it is blocked before any rollover, so its mute
      // never lapses by time there, and a sweep must not lift it either.
      ...(entry.sendPolicy === "deny" ? { extra: { sendPolicy: "deny" as const } } : {}),
    });
    if (rotated) result.rotated++;
    else {
      result.busy++;
      // Looked at again a little later, not by every sweep first: the sweep reads the oldest due
      // sessions, and a batch's worth of busy ones would keep it from ever reaching the others.
      // GT: a session touched meanwhile keeps its later instant.
      await svc.redis.zadd(svc.keys.staleIndex(), "XX", "GT", now + SWEEP_BUSY_RETRY_MS, key);
    }
  }
  return result;
}

export interface SweepRunResult extends SweepResult {
  /** Batches of `maintenance.sweepBatch` swept by this run. */
  batches: number;
  /** Sessions still due when the run stopped: a backlog the next sweep takes on. */
  remaining: number;
}

/**
 * The sweep job: batch after batch while batches come back full and `budgetMs` (half the sweep
 * interval) is not spent, so a backlog (every session crossing the daily boundary at once) is
 * not worked off at one batch per interval; then how many are still due, for operators.
 */
export async function sweepDue(
  svc: WorkerDeps,
  budgetMs: number,
  onBatch: (done: SweepRunResult) => Promise<unknown> = async () => undefined,
): Promise<SweepRunResult> {
  const started = Date.now();
  const total: SweepRunResult = { examined: 0, rotated: 0, rescheduled: 0, busy: 0, batches: 0, remaining: 0 };
  for (;;) {
    const r = await sweepOnce(svc);
    total.examined += r.examined;
    total.rotated += r.rotated;
    total.rescheduled += r.rescheduled;
    total.busy += r.busy;
    total.batches++;
    await onBatch(total);
    // Busy sessions were re-scored a minute on, so the next batch reads the ones behind them.
    if (r.examined < svc.config.maintenance.sweepBatch || Date.now() - started >= budgetMs) break;
  }
  total.remaining = await svc.redis.zcount(svc.keys.staleIndex(), "-inf", Date.now());
  return total;
}

export function createMaintenanceProcessor(svc: WorkerDeps) {
  const archiveLeases = new SessionLeases(svc.redis, svc.keys, ARCHIVE_LEASE_TTL_MS);
  return async (job: Job, token?: string): Promise<unknown> => {
    if (job.name === JOBS.sweep.name) {
      const r = await sweepDue(svc, svc.config.maintenance.sweepEveryMs / 2, async (done) =>
        job.updateProgress({ batches: done.batches, rotated: done.rotated }),
      );
      if (r.remaining > 0)
        svc.log.info({ remaining: r.remaining, rotated: r.rotated }, "reset sweep: sessions still due after this run");
      const rearmed = await rearmOverdueWakes(svc, wakeOverdueMs(svc.config));
      // After the overdue check: a session whose wake it just re-armed has a drain job now.
      const stranded = await repairStrandedSessions(svc, svc.config.maintenance.sweepEveryMs / 4);
      const stopped = await requeueStopped(svc, svc.config.maintenance.sweepBatch);
      const archives = await requeuePendingArchives(svc, svc.config.maintenance.sweepBatch);
      // Sub-agent runs whose spawn was cut off before their turn was queued: dropped past the grace.
      const cutOff = await dropCutOffRuns(svc, svc.config.maintenance.sweepBatch, {
        budgetMs: svc.config.maintenance.sweepEveryMs / 4,
      });
      if (cutOff.dropped || cutOff.failed)
        svc.log.warn(
          cutOff,
          "sub-agent runs whose spawn was cut off before their turn was queued: dropped by the sweep",
        );
      // Orchestrators waiting on sub-agent runs ended without an announce whose release a crash cut off.
      const releases = await releaseOwed(svc, svc.config.maintenance.sweepBatch);
      if (releases.released || releases.failed)
        svc.log.warn(releases, "sub-agent requester releases left owed by an end cut off: done by the sweep");
      await job.updateProgress(100);
      return { ...r, rearmed, stranded, stopped, archives, cutOff, releases };
    }
    if (job.name === JOBS.prune.name) {
      // session.maintenance (session-prune.ts): batch after batch within half the interval, as the sweep.
      const r = await pruneDue(svc, svc.config.maintenance.sweepEveryMs / 2, async (done) =>
        job.updateProgress({
          batches: done.batches,
          pruned: done.pruned,
          capped: done.capped,
          archives: done.archives,
        }),
      );
      await job.updateProgress(100);
      return r;
    }
    if (job.name === JOBS.archive.name) {
      const d = jobData("archive", job);
      const acquired = await archiveLeases.tryAcquire(d.sessionKey);
      if (!acquired.acquired) {
        return await retryLater(job, token, Math.min(acquired.retryInMs + 50, ARCHIVE_LEASE_POLL_MS));
      }
      try {
        // A turn of the retired transcript still to run (handed back at shutdown, parked on a
        // storage fault) would write to it after the rename, into a new file nothing archives:
        // it runs first (the lease is given back here), and the archive tries again after.
        if (await svc.inbox.hasTurnIn(d.sessionKey, d.sessionId))
          return await retryLater(job, token, ARCHIVE_LEASE_POLL_MS);
        const path = await svc.transcripts
          .archive(d.agentId, d.sessionId, d.kind, new Date(), topicOpt(d.sessionKey))
          .catch(async (err: unknown) => {
            // Retried by the job; meanwhile /readyz, status and doctor say storage is failing,
            // as for a parked turn (the log alone is easy to miss).
            const failure = classifyTurnFailure(err);
            if (failure.kind === "storage") {
              await svc.storageFaults
                .onBackgroundFault({
                  code: failure.code,
                  message: `archiving retired transcript ${d.sessionId} failed: ${failure.message} (retried)`,
                })
                .catch(() => undefined);
            }
            throw err;
          });
        await archiveDone(svc, d);
        return { archived: path ?? null };
      } finally {
        await acquired.lease.release();
      }
    }
    throw new Error(`unknown maintenance job ${job.name}`);
  };
}

export async function ensureSweepScheduler(svc: WorkerDeps): Promise<void> {
  // Idempotent: every worker calls it at boot (BullMQ upserts the one scheduler).
  await svc.queues.maintenance.upsertJobScheduler(
    SWEEP_SCHEDULER_ID,
    { every: svc.config.maintenance.sweepEveryMs },
    { name: JOBS.sweep.name, data: {}, opts: JOBS.sweep.options({}, svc.config) },
  );
}
