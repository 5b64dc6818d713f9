/**
 * One worker process (or the worker half of `switchboard start`): a BullMQ Worker per selected
 * queue, a cancel listener, and the sweep scheduler. Scale out by running more of these on any
 * number of hosts; ordering and crash safety come from the session inbox + lease, not from
 * where a job runs.
 */
import { Worker, type Processor } from "bullmq";
import type { Services } from "../app/services.js";
import { CancelBus } from "../runs/cancel-bus.js";
import { requestDrain } from "../runs/enqueue.js";
import type { QueueName } from "../queues/queue-names.js";
import { createDeliverProcessor } from "./deliver.js";
import { createDrainProcessor } from "./drain.js";
import { createMaintenanceProcessor, ensureSweepScheduler } from "./maintenance.js";
import { ensurePruneScheduler } from "./session-prune.js";
import { HolderWriter } from "../transcript/holder-writer.js";
import { RunningTurns, TurnExecutor, type ToolInvokerFactory } from "./turn-executor.js";

/** How long after a drain exhausted its retries another one is tried. */
const REARM_DRAIN_DELAY_MS = 5000;

export interface WorkerHostOptions {
  queues: QueueName[];
  concurrency?: number;
  tools: ToolInvokerFactory;
  /** Extra processors by queue (the announce queue's agent-to-agent steps). */
  processors?: Partial<Record<QueueName, Processor>>;
  /** How long `close()` waits for active jobs before forcing (BullMQ's close has no timeout). */
  closeTimeoutMs?: number;
}

export interface WorkerHost {
  workers: Worker[];
  running: RunningTurns;
  close(): Promise<void>;
}

export async function startWorkerHost(svc: Services, opts: WorkerHostOptions): Promise<WorkerHost> {
  const running = new RunningTurns();
  const writer = new HolderWriter(svc.config.storage.dir, svc.config.storage.fsync, svc.log);
  const executor = new TurnExecutor(svc, running, opts.tools, writer);
  const processors: Partial<Record<QueueName, Processor>> = {
    runs: createDrainProcessor(svc, executor) as Processor,
    subagents: createDrainProcessor(svc, executor) as Processor,
    delivery: createDeliverProcessor(svc) as Processor,
    maintenance: createMaintenanceProcessor(svc) as Processor,
    ...(opts.processors ?? {}),
  };

  // Cancels reach whichever process runs the session now.
  await CancelBus.listen(svc.connection("subscriber"), svc.keys, (m) => {
    if (running.abort(m.sessionKey, m.reason === "timeout" ? "run timed out" : `run ${m.reason}`, m.runId)) {
      svc.log.info({ sessionKey: m.sessionKey, runId: m.runId, reason: m.reason }, "run aborted by cancel");
    }
  });

  const { workers: w } = svc.config;
  const workers: Worker[] = [];
  for (const name of opts.queues) {
    const processor = processors[name];
    if (!processor) {
      svc.log.warn({ queue: name }, "no processor for queue; not starting a worker for it");
      continue;
    }
    const worker = new Worker(name, processor, {
      connection: svc.connection("worker"),
      prefix: svc.keys.bullPrefix,
      concurrency: name === "maintenance" ? 2 : (opts.concurrency ?? w.concurrency),
      lockDuration: w.lockDurationMs,
      stalledInterval: w.stalledIntervalMs,
      // A crash is not the job's fault: let stalled drains be retried many times.
      maxStalledCount: 50,
    });
    worker.on("error", (err) => svc.log.warn({ queue: name, err: err.message }, "worker error"));
    worker.on("failed", (job, err) => {
      svc.log.warn({ queue: name, jobId: job?.id, err: err.message }, "job failed");
      // A drain out of retries (Redis away for long, a bug) must not strand the session's
      // turns until its next message: re-arm one later. The inbox still holds them.
      if ((name === "runs" || name === "subagents") && job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        const sessionKey = (job.data as { sessionKey?: string }).sessionKey;
        if (sessionKey) void requestDrain(svc, sessionKey, REARM_DRAIN_DELAY_MS).catch(() => {});
      }
    });
    workers.push(worker);
  }
  if (opts.queues.includes("maintenance")) {
    await ensureSweepScheduler(svc);
    await ensurePruneScheduler(svc);
  }
  // Stored on the queue in Redis: one limit for every worker of the deployment.
  if (opts.queues.includes("subagents")) await svc.queues.subagents.setGlobalConcurrency(svc.config.agents.defaults.subagents.maxConcurrent);
  await Promise.all(workers.map((wk) => wk.waitUntilReady()));
  svc.log.info({ queues: opts.queues, concurrency: opts.concurrency ?? w.concurrency }, "workers started");

  return {
    workers,
    running,
    async close() {
      const timeout = opts.closeTimeoutMs ?? 10_000;
      await Promise.all(
        workers.map(async (wk) => {
          // Time-boxed: close() never resolves while Redis is unreachable (bullmq#4656).
          let timer: NodeJS.Timeout | undefined;
          const forced = new Promise<void>((resolve) => {
            timer = setTimeout(() => void wk.close(true).finally(resolve), timeout);
          });
          await Promise.race([wk.close(), forced]);
          clearTimeout(timer);
        }),
      );
      // Turns are done: fsync what group commit has not yet, close the transcript handles.
      await writer.close().catch((err: Error) => svc.log.warn({ err: err.message }, "closing transcripts failed"));
    },
  };
}
