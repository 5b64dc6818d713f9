/**
 * One worker process (or the worker half of `switchboard start`): a BullMQ Worker per selected
 * queue, a cancel listener, and the sweep scheduler. Scale out by running more of these on any
 * number of hosts; ordering and crash safety come from the session inbox + lease, not from
 * where a job runs.
 */
import { MetricsTime, Worker, type Processor } from "bullmq";
import type { WorkerDeps } from "./worker-deps.js";
import { CancelBus } from "../runs/cancel-bus.js";
import { requestDrain } from "../runs/enqueue.js";
import type { QueueName } from "../queues/queue-names.js";
import { createDeliverProcessor } from "../delivery/deliver.js";
import { createDrainProcessor, createSessionDrainer } from "./drain.js";
import { ReadyConsumer } from "./ready-consumer.js";
import { QueuePauses } from "./queue-pauses.js";
import { Slots } from "./slots.js";
import { createMaintenanceProcessor, ensureSweepScheduler } from "./maintenance.js";
import { ensurePruneScheduler } from "./session-prune.js";
import { HolderWriter } from "../transcript/holder-writer.js";
import type { ToolInvokerFactory } from "../runtimes/types.js";
import { RunningTurns, TurnExecutor } from "./turn-executor.js";
import {
  registerOutboundMetrics,
  registerTranscriptMetrics,
  registerTurnMetrics,
  transcriptSynced,
  transcriptSyncFailed,
} from "../metrics/index.js";

/** After the grace period, how long handed-back turns get to return their jobs (then they are left to stall). */
const HAND_BACK_TIMEOUT_MS = 5000;
/** With no job left, how long BullMQ's own close may take (it hangs while Redis is away). */
const CLOSE_SETTLE_MS = 2000;

/**
 * At most one log line per distinct message per window. `admit` says whether to log now, with
 * how many identical messages were held back since the last line of it; `flush` hands back the
 * held-back counts of windows that are over (a flood that stopped still gets its count logged),
 * each such line starting a new window: lines of one message are always a window apart.
 */
export class RepeatThrottle {
  private readonly seen = new Map<string, { since: number; suppressed: number }>();

  constructor(
    readonly windowMs = 10_000,
    /** Distinct messages remembered; the oldest is forgotten (with its count) past this. */
    private readonly maxMessages = 100,
  ) {}

  admit(message: string, now = Date.now()): { suppressed: number } | undefined {
    const s = this.seen.get(message);
    if (s && now - s.since < this.windowMs) {
      s.suppressed++;
      return undefined;
    }
    this.seen.delete(message);
    if (this.seen.size >= this.maxMessages) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(message, { since: now, suppressed: 0 });
    return { suppressed: s?.suppressed ?? 0 };
  }

  flush(now = Date.now()): { message: string; suppressed: number }[] {
    const out: { message: string; suppressed: number }[] = [];
    for (const [message, s] of this.seen) {
      if (now - s.since < this.windowMs) continue;
      if (!s.suppressed) {
        this.seen.delete(message);
        continue;
      }
      // The flushed line is this window's one line: the next identical message waits a window.
      out.push({ message, suppressed: s.suppressed });
      s.since = now;
      s.suppressed = 0;
    }
    return out;
  }
}

export interface WorkerHostOptions {
  queues: QueueName[];
  concurrency?: number;
  tools: ToolInvokerFactory;
  /** Extra processors by queue (the announce queue's agent-to-agent steps). */
  processors?: Partial<Record<QueueName, Processor>>;
  /** How long `close()` lets running turns finish before handing them back (default `workers.shutdownGraceMs`). */
  shutdownGraceMs?: number;
}

export interface WorkerHost {
  workers: Worker[];
  running: RunningTurns;
  /**
   * Graceful stop (docs/concepts/shutdown.md): take no new jobs or turns, let the turns held
   * finish within the grace period, hand back the ones still running (lease released, job back
   * in the queue), then close the transcript files.
   */
  close(): Promise<void>;
}

export async function startWorkerHost(svc: WorkerDeps, opts: WorkerHostOptions): Promise<WorkerHost> {
  const running = new RunningTurns();
  registerTranscriptMetrics();
  const writer = new HolderWriter(svc.config.storage.dir, svc.config.storage.fsync, svc.log, {
    synced: transcriptSynced,
    syncFailed: (_file, err) => {
      transcriptSyncFailed();
      const code = (err as NodeJS.ErrnoException).code ?? "EIO";
      void svc.storageFaults
        .onBackgroundFault({
          code,
          message: `fsync failed: ${err.message} (lines of finished turns may not be durable)`,
        })
        .catch(() => undefined);
    },
  });
  const executor = new TurnExecutor(svc, running, opts.tools, writer);
  const stopping = new AbortController();
  registerTurnMetrics();
  registerOutboundMetrics();
  const { workers: w } = svc.config;
  const drainSession = createSessionDrainer(svc, executor, stopping.signal);
  // An operator's pause of `runs` (or `subagents`) holds turns between two of them, ready-list drains included.
  const pauses = new QueuePauses(svc.queues);
  if (opts.queues.includes("runs") || opts.queues.includes("subagents")) await pauses.start();
  const drainJob = createDrainProcessor(svc, drainSession, (queue) => pauses.holdOf(queue)) as Processor;
  // The ready list gets `concurrency` slots of its own, as each queue's BullMQ worker does: a slot
  // shared with the runs queue would leave drain jobs a saturated worker fetched waiting there
  // (crash recoveries among them) while other workers idle (docs/design/runs.md, "Wake-ups").
  const consumer = opts.queues.includes("runs")
    ? new ReadyConsumer(
        svc,
        drainSession,
        new Slots(opts.concurrency ?? w.concurrency),
        stopping.signal,
        pauses.holdOf("runs"),
      )
    : null;
  const processors: Partial<Record<QueueName, Processor>> = {
    runs: drainJob,
    subagents: drainJob,
    delivery: createDeliverProcessor(svc) as Processor,
    maintenance: createMaintenanceProcessor(svc) as Processor,
    ...(opts.processors ?? {}),
  };

  // Cancels reach whichever process runs the session now.
  await CancelBus.listen(
    svc.connection("subscriber"),
    svc.keys,
    (m) => {
      if (running.abort(m.sessionKey, m.reason === "timeout" ? "run timed out" : `run ${m.reason}`, m.runId)) {
        svc.log.info({ sessionKey: m.sessionKey, runId: m.runId, reason: m.reason }, "run aborted by cancel");
      }
    },
    // Back after a reconnect: a cancel broadcast meanwhile was lost, but its record says so.
    () => void abortCancelledWhileAway().catch(() => undefined),
  );
  async function abortCancelledWhileAway(): Promise<void> {
    for (const { sessionKey, runId } of running.held()) {
      const reason = (await svc.runs.get(runId))?.cancelRequested;
      if (reason && running.abort(sessionKey, `run ${reason}`, runId))
        svc.log.info({ sessionKey, runId, reason }, "run aborted by a cancel recorded while the subscriber was away");
    }
  }

  // Jobs being processed here: once none is, a close that still hangs is stuck on Redis.
  let activeJobs = 0;
  const counted =
    (p: Processor): Processor =>
    async (job, token, signal) => {
      activeJobs++;
      try {
        return await p(job, token, signal);
      } finally {
        activeJobs--;
      }
    };
  const workers: Worker[] = [];
  for (const name of opts.queues) {
    const processor = processors[name];
    if (!processor) {
      svc.log.warn({ queue: name }, "no processor for queue; not starting a worker for it");
      continue;
    }
    const worker = new Worker(name, counted(processor), {
      connection: svc.connection("worker"),
      prefix: svc.keys.bullPrefix,
      concurrency: name === "maintenance" ? 2 : (opts.concurrency ?? w.concurrency),
      lockDuration: w.lockDurationMs,
      stalledInterval: w.stalledIntervalMs,
      // A crash is not the job's fault: let stalled drains be retried many times.
      maxStalledCount: 50,
      // BullMQ counts finished jobs only for workers created with this: the gateway's
      // bullmq_job_completed_total / bullmq_job_failed_total read those counts. The cost is an
      // HINCRBY in the script that already finishes the job, plus a per-minute list trimmed to
      // an hour (60 small numbers per queue and outcome); the counts themselves never trim.
      metrics: { maxDataPoints: MetricsTime.ONE_HOUR },
    });
    // BullMQ emits `error` for a failed fetch of the next job and fetches again at once: with
    // Redis refusing writes (maxmemory) that is thousands a second. One line per distinct error
    // per 10 s, with how many identical ones were not logged.
    const errors = new RepeatThrottle();
    const flushErrors = setInterval(() => {
      for (const r of errors.flush())
        svc.log.warn({ queue: name, err: r.message, suppressed: r.suppressed }, "worker error");
    }, errors.windowMs).unref();
    worker.on("closed", () => clearInterval(flushErrors));
    worker.on("error", (err) => {
      const admitted = errors.admit(err.message);
      if (admitted)
        svc.log.warn(
          { queue: name, err: err.message, ...(admitted.suppressed ? { suppressed: admitted.suppressed } : {}) },
          "worker error",
        );
    });
    worker.on("failed", (job, err) => {
      svc.log.warn({ queue: name, jobId: job?.id, err: err.message }, "job failed");
      // A drain out of retries (Redis away for long, a bug) must not strand the session's
      // turns until its next message: re-arm one later. The inbox still holds them.
      if ((name === "runs" || name === "subagents") && job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        const sessionKey = (job.data as { sessionKey?: string }).sessionKey;
        if (sessionKey) void requestDrain(svc, sessionKey, w.rearmDrainDelayMs).catch(() => {});
      }
    });
    workers.push(worker);
  }
  if (opts.queues.includes("maintenance")) {
    await ensureSweepScheduler(svc);
    await ensurePruneScheduler(svc);
  }
  // Stored on the queue in Redis: one limit for every worker of the deployment.
  if (opts.queues.includes("subagents"))
    await svc.queues.subagents.setGlobalConcurrency(svc.config.agents.defaults.subagents.maxConcurrent);
  await Promise.all(workers.map((wk) => wk.waitUntilReady()));
  consumer?.start();
  svc.log.info({ queues: opts.queues, concurrency: opts.concurrency ?? w.concurrency }, "workers started");

  return {
    workers,
    running,
    async close() {
      if (stopping.signal.aborted) return;
      stopping.abort();
      const graceMs = opts.shutdownGraceMs ?? w.shutdownGraceMs;
      // Not forced: BullMQ stops fetching and resolves once the active jobs are done; the ready
      // list consumer stops popping (within one blocking pop) and waits for its drains.
      const finished = Promise.all([
        ...workers.map((wk) => wk.close().catch(() => undefined)),
        consumer?.close().catch(() => undefined),
      ]);
      // Done when the jobs are: BullMQ's close can hang on an unreachable Redis (bullmq#4656)
      // with nothing left to wait for, and forcing it then changes nothing (it is already closing).
      const idle = until(() => activeJobs === 0 && (consumer?.active ?? 0) === 0);
      const jobsDone = Promise.race([finished, idle.promise]);
      // Handing back and settling need Redis: with Redis away, waiting for them waits for nothing
      // (the turns are recovered like a crashed worker's once it is back: lease expiry, stall check).
      let redisAway = false;
      if (!(await within(jobsDone, graceMs))) {
        const handed = running.handBackAll();
        redisAway = svc.redis.status !== "ready";
        if (redisAway)
          svc.log.warn(
            { graceMs, turns: handed },
            "shutdown grace over and Redis is not reachable: running turns interrupted, not handed back; " +
              "they run again once Redis is back (after the lease expires)",
          );
        else {
          svc.log.warn({ graceMs, turns: handed }, "shutdown grace over: handing running turns back");
          // A runtime that ignores its abort keeps its job: it stalls and is retried elsewhere.
          if (!(await within(jobsDone, HAND_BACK_TIMEOUT_MS)))
            svc.log.warn(
              { jobs: activeJobs, readyDrains: consumer?.active ?? 0 },
              "jobs did not return in time; leaving them to stall",
            );
        }
      }
      idle.cancel();
      pauses.stop();
      if (!redisAway) await within(finished, CLOSE_SETTLE_MS);
      // Turns are done: fsync what group commit has not yet, close the transcript handles.
      await writer.close().catch((err: Error) => svc.log.warn({ err: err.message }, "closing transcripts failed"));
    },
  };
}

/** True when `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once `cond` holds (checked every 50 ms) unless cancelled. */
function until(cond: () => boolean): { promise: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<void>((resolve) => {
    const check = () => (cond() ? resolve() : void (timer = setTimeout(check, 50)));
    check();
  });
  return { promise, cancel: () => clearTimeout(timer) };
}
