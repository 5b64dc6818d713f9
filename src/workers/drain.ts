/**
 * A drain: run the turns of session S under its lease until the inbox is empty. It is started
 * by a session popped from the ready list (ready-consumer.ts, the default wake-up) or by the
 * `drain` job of the runs queue, which this module also provides. Producers that wake by job
 * push the turn to S's inbox, then add a drain job deduplicated by S with `keepLastIfActive` — so there is at
 * most one drain of S active, plus one follow-up stored when a turn arrives mid-drain (BullMQ
 * re-creates it when the active one finishes). That closes the lost-wake-up window: a turn
 * pushed after the drainer's last empty take still gets a drainer.
 *
 * The lease (with fencing) is the second guard: if BullMQ ever runs two drains of S at once (a
 * stalled-but-alive worker), only the lease holder takes turns, and a holder that lost its lease
 * cannot write. See docs/design/runs.md.
 *
 * No turn can wedge its session (docs/concepts/reliability.md): a turn that fails outside its
 * runtime is classified (turn-failure.ts). Storage faults park it with backoff until the
 * storage deadline; data no retry can fix ends it as `error` at once; anything else is retried
 * a few times. A turn given up is finished as `error` and its message kept as a dead letter.
 */
import { retryLater } from "../queues/retry-later.js";
import { createHash } from "node:crypto";
import { WaitingError, type Job } from "bullmq";
import type { WorkerDeps } from "./worker-deps.js";
import { StaleFenceError, TurnHandedBackError } from "../errors/index.js";
import type { NextTurn, TurnExecutor } from "./turn-executor.js";
import { requestDrain } from "../runs/enqueue.js";
import { jobData, type DrainData } from "../queues/jobs.js";
import type { DeadLetter } from "../runs/dead-letters.js";
import type { LeaseHandle } from "../runs/session-lease.js";
import type { BegunTurn } from "../runs/inbox.js";
import { classifyTurnFailure, storageRetryDelayMs } from "../runs/turn-failure.js";
import type { Turn } from "../runs/turn.js";
import { leaseAcquired, turnEnded, turnStarted } from "../metrics/index.js";

/** Turns per drain job before it yields its worker slot to other sessions (fairness). */
export const MAX_TURNS_PER_DRAIN = 20;
/** A drain that keeps finding the lease held gives up after this many delays (then retries). */
const MAX_LEASE_WAITS = 2000;
/** Transient failures of one turn outside its runtime before it is given up. */
const MAX_TURN_INFRA_FAILURES = 5;
/** Re-check a held lease this often: short holders (an archive job) finish in milliseconds, and
 *  a crashed holder's lease expires by itself; waiting out the whole TTL would add seconds. */
const LEASE_POLL_MS = 250;

export interface DrainResult {
  ran: number;
  runs: string[];
}

/** What a drain of one session came to; the caller (a drain job, the ready consumer) acts on it. */
export type DrainOutcome =
  /** Another holder has the lease (or a crashed one's has not expired): ask again later. */
  | { kind: "busy"; retryInMs: number }
  /**
   * Ran what it could; `more`: it yielded at MAX_TURNS_PER_DRAIN with turns still queued;
   * `emptied`: a script found the inbox empty and gave the lease back (clearing a kept wake).
   */
  | { kind: "done"; ran: number; runs: string[]; more: boolean; emptied: boolean }
  /** The in-flight turn hit a storage fault: it stays first in line, retry after `parkMs`. */
  | { kind: "parked"; parkMs: number }
  /** Stopped with work left (a turn handed back, the worker shutting down, its queue paused); lease released. */
  | { kind: "handedBack" };

/** What a drain needs from whoever started it. */
export interface DrainContext {
  /** Retry state carried by a drain job (empty for a drain woken from the ready list). */
  data: Pick<DrainData, "storageRetries" | "leaseWaitSince">;
  /** A line for the operator (the job's log in Bull Board). */
  log(line: string): Promise<unknown>;
  /**
   * The pending wake a ready-list drain keeps until it ends: the script that gives the lease back
   * on an empty inbox clears it in the same step (otherwise the caller clears it).
   */
  keepWake?: string;
  /**
   * Whether its queue is paused (queue-pauses.ts): the drain then takes no further turn and hands
   * the session back, as at shutdown, so a paused queue holds turns between two of them.
   */
  hold?: HoldCheck;
}

/** A queue's pause flag as a drain reads it: a copy read every second, and a fresh read. */
export interface HoldCheck {
  /** The copy (no I/O): may lag a pause or a resume by up to a second. */
  cached(): boolean;
  /** Read now: a drain confirms a hold before it hands back (a resume the copy missed costs no hand-back). */
  confirm(): Promise<boolean>;
}

type TurnStep = { status: string; next?: NextTurn } | { parkMs: number } | { handedBack: true };

/**
 * `stopping` aborts when the worker shuts down: a drain then takes no further turn (the job
 * that follows it runs them on another worker), and a turn handed back mid-run sends this job
 * back to the queue with the lease released, so another worker takes over at once.
 */
export function createSessionDrainer(
  svc: WorkerDeps,
  executor: TurnExecutor,
  stopping: AbortSignal = new AbortController().signal,
) {
  /** End a turn that will not be retried: `error` on its record, its message dead-lettered. */
  async function giveUp(
    lease: LeaseHandle,
    ctx: DrainContext,
    turn: Turn,
    kind: DeadLetter["kind"],
    reason: string,
  ): Promise<void> {
    const letter: DeadLetter = {
      runId: turn.runId,
      sessionKey: turn.sessionKey,
      reason,
      kind,
      failedAt: Date.now(),
      replays: turn.replays ?? 0,
      turn,
    };
    await executor.giveUp(turn, lease, reason, letter);
    await svc.redis.hincrby(svc.keys.stats(), kind === "storage" ? "runs_storage_deadline" : "runs_poisoned", 1);
    svc.log.error(
      { sessionKey: turn.sessionKey, runId: turn.runId, kind, reason },
      "turn given up; message kept as a dead letter",
    );
    await ctx.log(`run ${turn.runId} given up (${kind}): ${reason}`).catch(() => 0);
  }

  async function runTurn(
    lease: LeaseHandle,
    ctx: DrainContext,
    begun: BegunTurn,
    beginNext: () => boolean,
  ): Promise<TurnStep> {
    const { turn } = begun;
    try {
      const outcome = await executor.execute(begun, lease, beginNext);
      await svc.storageFaults.onSuccess();
      return { status: outcome.status, next: outcome.next };
    } catch (err) {
      if (err instanceof TurnHandedBackError) return { handedBack: true };
      const failure = classifyTurnFailure(err);
      switch (failure.kind) {
        case "stale":
          throw err;
        case "storage": {
          const park = await svc.storageFaults.onFault(turn.runId, failure);
          if (!park.expired) {
            const parkMs = storageRetryDelayMs(ctx.data.storageRetries ?? 0, svc.config.storage.faultRetryMaxDelayMs);
            await ctx.log(`run ${turn.runId} parked ${parkMs} ms: ${park.reason}`).catch(() => 0);
            return { parkMs };
          }
          await giveUp(lease, ctx, turn, "storage", park.reason);
          return { status: "error" };
        }
        case "permanent":
          await giveUp(lease, ctx, turn, "permanent", `cannot run this turn: ${failure.message}`);
          return { status: "error" };
        case "transient": {
          const failures = await svc.redis.hincrby(svc.keys.run(turn.runId), "infraFailures", 1);
          if (failures < MAX_TURN_INFRA_FAILURES) throw err; // the drain is retried with backoff
          await giveUp(lease, ctx, turn, "permanent", `gave up after ${failures} failures: ${failure.message}`);
          return { status: "error" };
        }
      }
    }
  }

  return async (sessionKey: string, ctx: DrainContext): Promise<DrainOutcome> => {
    // Stopping, or its queue paused since this drain was woken: the session is left untouched, no
    // turn begun for nothing. A pause is the copy of the flag (no I/O) confirmed by a fresh read.
    if (stopping.aborted || (ctx.hold?.cached() && (await ctx.hold.confirm()))) return { kind: "handedBack" };
    // Lease and first turn in one round trip; an empty session gives the lease back in it too.
    const acquired = await svc.inbox.acquireAndBegin(
      svc.leases,
      sessionKey,
      ctx.keepWake ? { keepWake: ctx.keepWake } : {},
    );
    if (!acquired.acquired) return { kind: "busy", retryInMs: acquired.retryInMs };
    const lease = acquired.lease;
    leaseAcquired(ctx.data.leaseWaitSince);
    const runs: string[] = [];
    let parkMs: number | undefined;
    let handedBack = false;
    // Nothing to run: the script gave the lease back already.
    let emptied = acquired.begun === null;
    let halted = false;
    try {
      // The first turn came with the lease; later ones come with the previous finish, or from turn-begin.
      let next: NextTurn = acquired.begun;
      while (runs.length < MAX_TURNS_PER_DRAIN) {
        // The worker is shutting down (a turn begun already is handed back), or the queue was
        // paused: then a turn begun already runs (it counts an attempt: holding it would make its
        // run after the resume a re-run), and no further one is begun.
        if (stopping.aborted || (next === undefined && ctx.hold?.cached() && (await ctx.hold.confirm()))) {
          halted = true;
          break;
        }
        if (lease.lost.aborted) throw new StaleFenceError(sessionKey, lease.token, null);
        // The previous turn's finish may have begun this one already (one round trip per turn);
        // finding the inbox empty also releases the lease (one round trip less per drain).
        const begun = next !== undefined ? next : await svc.inbox.begin(lease, { releaseWhenEmpty: true });
        next = undefined;
        if (!begun) {
          emptied = true;
          break;
        }
        if ("corrupt" in begun) {
          await discardCorrupt(svc, lease, ctx, begun.corrupt);
          runs.push("corrupt:discarded");
          continue;
        }
        const timing = turnStarted(begun);
        // The last turn of this drain does not begin another: the next drain will. Nor does a
        // turn that finishes after the worker began shutting down or the queue was paused.
        const last = runs.length + 1 >= MAX_TURNS_PER_DRAIN;
        const step = await runTurn(lease, ctx, begun, () => !last && !stopping.aborted && !ctx.hold?.cached());
        if ("parkMs" in step) {
          parkMs = step.parkMs;
          break;
        }
        if ("handedBack" in step) {
          handedBack = true;
          break;
        }
        turnEnded(timing, step.status);
        runs.push(`${begun.turn.runId}:${step.status}`);
        next = step.next;
      }
    } finally {
      await lease.release().catch(() => false);
    }
    // Stopped with work left (a turn handed back, or none begun because the worker is shutting
    // down or the queue is paused): a begun turn stays in-flight (first in line), the lease is free.
    if (handedBack || (halted && !emptied)) return { kind: "handedBack" };
    if (parkMs !== undefined) return { kind: "parked", parkMs };
    const more = runs.length >= MAX_TURNS_PER_DRAIN && (await svc.inbox.depth(sessionKey)) > 0;
    return { kind: "done", ran: runs.length, runs, more, emptied };
  };
}

export type SessionDrainer = ReturnType<typeof createSessionDrainer>;

/**
 * The `drain` job's processor: a drain of its session, with the job's retry state. `holdOf` gives
 * a queue's pause flag: a drain of a paused queue's job stops between turns and goes back to
 * wait, where BullMQ keeps it until the queue is resumed.
 */
export function createDrainProcessor(
  svc: WorkerDeps,
  drainSession: SessionDrainer,
  holdOf?: (queue: string) => HoldCheck,
) {
  return async (job: Job<DrainData>, token?: string): Promise<DrainResult> => {
    const { sessionKey } = jobData("drain", job);
    const out = await drainSession(sessionKey, {
      data: job.data,
      log: (line) => job.log(line),
      ...(holdOf ? { hold: holdOf(job.queueName) } : {}),
    });
    switch (out.kind) {
      case "busy": {
        const waits = (job.data.leaseWaits ?? 0) + 1;
        if (waits > MAX_LEASE_WAITS)
          throw new Error(`session ${sessionKey} lease stayed busy through ${MAX_LEASE_WAITS} waits`);
        await job.updateData({ ...job.data, leaseWaits: waits, leaseWaitSince: job.data.leaseWaitSince ?? Date.now() });
        return await retryLater(job, token, leasePollMs(out.retryInMs));
      }
      case "handedBack":
        // Whichever worker takes this job next runs the turn now, not after the lease TTL or the
        // stall check (in a paused queue: once it is resumed).
        await job.moveToWait(token);
        throw new WaitingError();
      case "parked":
        // The turn stays in-flight (first in line) and this same job comes back later.
        await job.updateData({
          ...job.data,
          storageRetries: (job.data.storageRetries ?? 0) + 1,
          leaseWaitSince: undefined,
        });
        return await retryLater(job, token, out.parkMs);
      case "done":
        // Yielded with work left: chain another drain (stored as the dedup follow-up while we are active).
        if (out.more) await requestDrain(svc, sessionKey);
        return { ran: out.ran, runs: out.runs };
    }
  };
}

/** How long a drain that found the lease held waits before it asks again. */
export function leasePollMs(retryInMs: number): number {
  return Math.min(retryInMs + 20, LEASE_POLL_MS);
}

async function discardCorrupt(svc: WorkerDeps, lease: LeaseHandle, ctx: DrainContext, raw: string): Promise<void> {
  const id = `corrupt-${createHash("sha256").update(raw).digest("hex").slice(0, 24)}`;
  const reason = "the queued turn is not readable (corrupt entry)";
  await svc.inbox.discard(lease, raw, {
    runId: id,
    sessionKey: lease.sessionKey,
    reason,
    kind: "corrupt",
    failedAt: Date.now(),
    replays: 0,
    raw,
  });
  await svc.redis.hincrby(svc.keys.stats(), "runs_poisoned", 1);
  svc.log.error({ sessionKey: lease.sessionKey, id }, "corrupt turn moved to the dead letters");
  await ctx.log(`corrupt in-flight entry moved to dead letter ${id}`).catch(() => 0);
}
