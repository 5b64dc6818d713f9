/**
 * Every job Switchboard puts on a queue, in one typed table: its name, the queue it goes to,
 * its data (a zod schema), and its options (attempts, backoff, and the id rule that makes a
 * retried producer add it once). Producers add jobs only through `addJob`, which checks the
 * data; processors read it only through `jobData`, which checks it again, so a job with
 * malformed data fails at once (no retries: they could not fix it) instead of half-running.
 *
 * | job                | queue              | id rule (why a retry adds it once)                    |
 * |--------------------|--------------------|-------------------------------------------------------|
 * | drain              | runs / subagents   | deduplicated per session (one active + one follow-up) |
 * | deliver            | delivery           | the delivery id                                       |
 * | archive            | maintenance        | `archive-<sessionId>-<kind>`                          |
 * | sweep, prune       | maintenance        | Job Schedulers (one per deployment)                   |
 * | a2a.step           | announce           | `cont-<runId>` (the run it follows)                   |
 * | subagent.announce  | announce           | `announce:<childKey>:<runId>`                         |
 * | subagent.archive   | announce           | `sa-archive-<runId>`                                  |
 */
import { UnrecoverableError, type Job, type JobsOptions } from "bullmq";
import { z } from "zod";
import type { Config } from "../config/schema.js";
import { TERMINAL_STATUSES } from "../runs/run-status.js";
import { isSubagentKey } from "../session/key-classify.js";
import { jobIdPart, type QueueName } from "./queue-names.js";
import type { Queues } from "./queues.js";
import type { TurnContinuation } from "../runs/turn.js";

export interface JobDef<S extends z.ZodType = z.ZodType> {
  /** The BullMQ job name. */
  name: string;
  /** The queue it is added to (drain jobs: decided by the session). */
  queue: QueueName | ((data: z.infer<S>) => QueueName);
  data: S;
  /** Attempts, backoff, and the job id (or deduplication id) that makes adds idempotent. */
  options: (data: z.infer<S>, config: Config) => JobsOptions;
}

function defineJob<S extends z.ZodType>(def: JobDef<S>): JobDef<S> {
  return def;
}

const exponential = (delay: number) => ({ type: "exponential" as const, delay });

export const DrainDataSchema = z.object({
  sessionKey: z.string().min(1),
  leaseWaits: z.number().int().nonnegative().optional(),
  /** When this drain first found the session's lease busy (the lease-wait metric). */
  leaseWaitSince: z.number().optional(),
  /** Times the current in-flight turn was parked on a storage fault (sets the backoff). */
  storageRetries: z.number().int().nonnegative().optional(),
});

export const DeliveryRouteSchema = z.object({
  channel: z.string().min(1),
  to: z.string().optional(),
  accountId: z.string().optional(),
  threadId: z.string().optional(),
});

export const DeliverDataSchema = z.object({
  id: z.string().min(1),
  sessionKey: z.string().min(1),
  route: DeliveryRouteSchema,
  message: z.string(),
  kind: z.string().min(1),
  /** The chat type where it goes, when the sender knows it (an inbound command's reply): for sendPolicy rules. */
  chatType: z.string().min(1).optional(),
});

export const ArchiveDataSchema = z.object({
  sessionKey: z.string().min(1),
  agentId: z.string().min(1),
  sessionId: z.string().min(1),
  kind: z.enum(["reset", "deleted"]),
});

/** The agent-to-agent flow's state, carried from step to step (src/tools/a2a-flow.ts). */
export const A2AStateSchema = z.object({
  requesterKey: z.string().min(1),
  requesterChannel: z.string().optional(),
  targetKey: z.string().min(1),
  targetChannel: z.string().optional(),
  requesterAgent: z.string(),
  targetAgent: z.string(),
  original: z.string(),
  round1: z.string().optional(),
  latest: z.string().optional(),
  /** Ping-pong turns done so far. */
  turn: z.number().int().nonnegative(),
  maxTurns: z.number().int().nonnegative(),
  /** Which side ran the step this job follows. */
  phase: z.enum(["after-primary", "after-reply", "after-announce"]),
  current: z.enum(["requester", "target"]).optional(),
  hop: z.number().int().nonnegative(),
  traceId: z.string(),
  /** The first (primary) run: the key of the late flag. */
  primaryRunId: z.string().min(1),
});

/** What a continuation adds to its data: the outcome of the run it follows (src/runs/continuation.ts). */
const RunOutcomeFields = {
  runId: z.string().min(1),
  reply: z.string().optional(),
  status: z.enum(TERMINAL_STATUSES).optional(),
  error: z.string().optional(),
  /** Checks made so far for the followed run to become terminal. */
  terminalWaits: z.number().int().nonnegative().optional(),
};

export const A2AStepDataSchema = A2AStateSchema.extend({ ...RunOutcomeFields, reply: z.string() });

export const SubagentAnnounceDataSchema = z.object({
  childKey: z.string().min(1),
  /** The registry run announced, when it is not `runId` (an orchestrator reporting after its sub-agents). */
  registryRunId: z.string().min(1).optional(),
  /** The sub-agent whose end asked for this claim, when no completion turn carried it. */
  via: z.string().min(1).optional(),
  /** How many times this job waited for its post's turn in its chat's lane (src/delivery/delivery-lane.ts). */
  laneWaits: z.number().int().min(0).optional(),
  ...RunOutcomeFields,
});

export const SubagentArchiveDataSchema = z.object({ runId: z.string().min(1) });

const NoData = z.object({});

/** `announce:<childKey>:<runId>`. BullMQ accepts ':' in a custom id only as exactly three parts,
 *  so the key's own colons are replaced. */
export function subagentAnnounceJobId(childKey: string, runId: string): string {
  return `announce:${jobIdPart(childKey)}:${jobIdPart(runId)}`;
}

/** The queue of a session's drain jobs: sub-agent sessions drain on `subagents` (its own concurrency cap). */
export function drainQueueOf(sessionKey: string): "runs" | "subagents" {
  return isSubagentKey(sessionKey) ? "subagents" : "runs";
}

export const JOBS = {
  /** "Session S has turns waiting" (src/workers/drain.ts). */
  drain: defineJob({
    name: "drain",
    queue: (d) => drainQueueOf(d.sessionKey),
    data: DrainDataSchema,
    options: (d) => ({
      // At most one active drain per session, plus one follow-up stored while it is active.
      deduplication: { id: d.sessionKey, keepLastIfActive: true },
      attempts: 10,
      backoff: exponential(500),
    }),
  }),
  /** One outbound message to one channel (src/workers/deliver.ts). */
  deliver: defineJob({
    name: "deliver",
    queue: "delivery",
    data: DeliverDataSchema,
    options: (d, config) => ({
      jobId: jobIdPart(d.id),
      attempts: config.workers.deliveryAttempts,
      backoff: exponential(config.workers.deliveryBackoffMs),
    }),
  }),
  /** Rename an old transcript once the session lease is free (src/workers/maintenance.ts). */
  archive: defineJob({
    name: "archive",
    queue: "maintenance",
    data: ArchiveDataSchema,
    options: (d) => ({
      jobId: `archive-${jobIdPart(d.sessionId)}-${d.kind}`,
      attempts: 20,
      backoff: exponential(1000),
    }),
  }),
  /** Rotate sessions gone stale (Job Scheduler, src/workers/maintenance.ts). */
  sweep: defineJob({
    name: "sweep",
    queue: "maintenance",
    data: NoData,
    options: () => ({ removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } }),
  }),
  /** session.maintenance pruning (Job Scheduler, src/workers/session-prune.ts). */
  prune: defineJob({
    name: "prune",
    queue: "maintenance",
    data: NoData,
    options: () => ({ removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } }),
  }),
  /**
   * The next step of the agent-to-agent flow, as a job: only for turns dropped by `/stop` and for
   * steps added by the previous release; a finishing worker applies steps in its finish
   * (src/tools/a2a-flow.ts, docs/design/runs.md).
   */
  a2aStep: defineJob({
    name: "a2a.step",
    queue: "announce",
    data: A2AStepDataSchema,
    options: (d) => ({ jobId: `cont-${jobIdPart(d.runId)}`, attempts: 10, backoff: exponential(500) }),
  }),
  /** A finished sub-agent run's durable announce (src/subagents/announce.ts). */
  subagentAnnounce: defineJob({
    name: "subagent.announce",
    queue: "announce",
    data: SubagentAnnounceDataSchema,
    options: (d, config) => ({
      // An orchestrator's claims are more announces for its run: the id names every run involved.
      jobId: subagentAnnounceJobId(
        d.childKey,
        [d.runId, ...(d.registryRunId ? [d.registryRunId] : []), ...(d.via ? [d.via] : [])].join("."),
      ),
      attempts: config.agents.defaults.subagents.announceAttempts,
      backoff: exponential(config.agents.defaults.subagents.announceBackoffMs),
    }),
  }),
  /** Archive a sub-agent run's registry record after `archiveAfterMinutes` (src/subagents/announce.ts). */
  subagentArchive: defineJob({
    name: "subagent.archive",
    queue: "announce",
    data: SubagentArchiveDataSchema,
    options: (d, config) => ({
      jobId: `sa-archive-${jobIdPart(d.runId)}`,
      delay: config.agents.defaults.subagents.archiveAfterMinutes * 60_000,
      attempts: 5,
      backoff: exponential(1000),
    }),
  }),
} as const;

export type JobKind = keyof typeof JOBS;
export type JobData<K extends JobKind> = z.infer<(typeof JOBS)[K]["data"]>;

export type DrainData = z.infer<typeof DrainDataSchema>;
export type DeliverData = z.infer<typeof DeliverDataSchema>;
export type ArchiveJobData = z.infer<typeof ArchiveDataSchema>;
export type A2AState = z.infer<typeof A2AStateSchema>;
export type A2AStepData = z.infer<typeof A2AStepDataSchema>;

/** The job kind called `name` (continuations are stored by job name), or undefined. */
export function jobKindByName(name: string): JobKind | undefined {
  return (Object.keys(JOBS) as JobKind[]).find((k) => JOBS[k].name === name);
}

export function queueOf<K extends JobKind>(kind: K, data: JobData<K>): QueueName {
  const q = JOBS[kind].queue as QueueName | ((d: JobData<K>) => QueueName);
  return typeof q === "function" ? q(data) : q;
}

/** Jobs a turn adds when it has an outcome (its continuation), with the outcome in their data. */
export type ContinuationKind = "a2aStep" | "subagentAnnounce";

/**
 * The continuation a turn carries: `kind`'s job, added by `enqueueContinuation` with the run's
 * outcome merged into `data`. Queue, id and retries are stored too (as before the table existed)
 * so a worker of the previous release adds the same job during a rolling restart.
 */
export function continuationOf(
  kind: ContinuationKind,
  runId: string,
  data: Record<string, unknown>,
  config: Config,
): TurnContinuation {
  const def = JOBS[kind] as unknown as JobDef;
  const opts = def.options({ ...data, runId }, config);
  const backoff = opts.backoff as { delay?: number } | undefined;
  return {
    queue: queueOf(kind, { ...data, runId } as never),
    name: def.name,
    data,
    ...(typeof opts.jobId === "string" ? { jobId: opts.jobId } : {}),
    ...(opts.attempts !== undefined ? { attempts: opts.attempts } : {}),
    ...(backoff?.delay !== undefined ? { backoffMs: backoff.delay } : {}),
  };
}

/** Thrown by a producer handing a job data that its schema refuses: a bug, said plainly. */
export class InvalidJobDataError extends Error {
  constructor(kind: string, error: z.ZodError) {
    super(
      `invalid ${kind} job data: ` +
        `${error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`,
    );
    this.name = "InvalidJobDataError";
  }
}

/**
 * Add a `kind` job: data checked against its schema, queue and options from the table.
 * `extra` adds per-call options (a delay).
 */
export async function addJob<K extends JobKind>(
  svc: { queues: Queues; config: Config },
  kind: K,
  data: JobData<K>,
  extra: JobsOptions = {},
): Promise<Job> {
  const def = JOBS[kind] as unknown as JobDef;
  const parsed = def.data.safeParse(data);
  if (!parsed.success) throw new InvalidJobDataError(kind, parsed.error);
  const value = parsed.data as JobData<K>;
  // Object.assign, not a spread: docs/development.md, "Copies on the hot path".
  const opts = Object.assign(def.options(value, svc.config), extra);
  return await svc.queues[queueOf(kind, value)].add(def.name, value, opts);
}

/**
 * A processor's view of a job's data, checked against its kind's schema. Malformed data fails
 * the job for good (UnrecoverableError): no retry can repair it, and it stays visible in Bull
 * Board with the reason.
 */
export function jobData<K extends JobKind>(kind: K, job: Job): JobData<K> {
  const parsed = (JOBS[kind].data as z.ZodType).safeParse(job.data);
  if (!parsed.success) throw new UnrecoverableError(new InvalidJobDataError(kind, parsed.error).message);
  return parsed.data as JobData<K>;
}
