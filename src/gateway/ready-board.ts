/**
 * The ready list in Bull Board. A drain woken from the ready list is not a BullMQ job
 * (docs/design/runs.md, "Wake-ups"), so the runs queue does not show it; this read-only
 * pseudo-queue, `ready`, shows that work and its failures next to the real queues:
 *
 * - waiting: sessions on the ready list, woken and not yet taken by a worker (oldest first);
 * - active: woken sessions a drain has (pending wakes not on the ready list: a ready drain,
 *   or, for a session woken by a drain job, the job until it begins the turn);
 * - failed: the dead letters, turns given up and kept for replay (`switchboard deadletters`);
 * - workers: the connections of the ready-list consumers (named: readyConsumerName).
 *
 * Each entry is shown under the runId of the turn that woke the session. Nothing here can be
 * changed from the board: a wake is not a job to retry or remove (replays go through the CLI or
 * the `deadletters.replay` RPC). Listing reads at most LIST_CAP entries of the pending set;
 * the failed tab reads only the dead letters of the page shown (DeadLetters.newestFirst).
 */
import { BaseAdapter } from "@bull-board/api/dist/queueAdapters/base.js";
import type {
  AppJobScheduler,
  JobCounts,
  JobSchedulerUpdateResult,
  JobState,
  JobStatus,
  QueueJob,
  QueueJobJson,
  QueueMetrics,
  QueueWorker,
  Status,
} from "@bull-board/api/dist/types.js";
import { SwitchboardError } from "../errors/index.js";
import type { DeadLetter, DeadLetters } from "../runs/dead-letters.js";
import { pendingWakeSuffix, readyConsumerName, wakeRunId, wakeSession } from "../runs/pending-wakes.js";
import type { RunRecords } from "../runs/run-records.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { Queues } from "../queues/queues.js";

export const READY_BOARD_NAME = "ready";

/** The most pending-set and ready-list entries one listing of `active` reads. */
const LIST_CAP = 10_000;

const DESCRIPTION =
  "Sessions woken from the ready list (not BullMQ jobs): waiting = no worker took them yet, " +
  "active = a drain has them, failed = dead letters (replay: switchboard deadletters)";

export interface ReadyBoardDeps {
  redis: RedisClient;
  keys: RedisKeys;
  /** The runs queue, whose pause holds the ready list too (src/workers/queue-pauses.ts). */
  queues: Pick<Queues, "runs">;
  runs: RunRecords;
  deadLetters: DeadLetters;
}

function readOnly(): never {
  throw new SwitchboardError(
    "forbidden",
    "the ready list is read-only in Bull Board: its entries are wake-ups, not jobs " +
      "(replay a dead letter with `switchboard deadletters replay <runId>`)",
  );
}

/** One entry as Bull Board renders a job. */
class ReadyBoardJob implements QueueJob {
  readonly opts = {};
  constructor(
    private readonly json: QueueJobJson,
    private readonly state: JobState,
  ) {}
  toJSON(): QueueJobJson {
    return this.json;
  }
  async getState(): Promise<JobState> {
    return this.state;
  }
  async promote(): Promise<void> {
    readOnly();
  }
  async remove(): Promise<void> {
    readOnly();
  }
  async retry(): Promise<void> {
    readOnly();
  }
}

function jobJson(fields: Partial<QueueJobJson> & Pick<QueueJobJson, "id" | "name" | "timestamp" | "data">) {
  return {
    progress: 0,
    attemptsMade: 0,
    failedReason: "",
    stacktrace: null,
    returnvalue: null,
    opts: {},
    ...fields,
  } satisfies QueueJobJson;
}

/** A pending wake `<runId>|<sessionKey>` woken at `at` (ms). */
function wakeJob(member: string, at: number | null, state: "waiting" | "active"): ReadyBoardJob {
  const runId = wakeRunId(member);
  const sessionKey = wakeSession(member);
  return new ReadyBoardJob(
    jobJson({
      id: runId,
      name: sessionKey,
      timestamp: at ?? 0,
      ...(state === "active" && at !== null ? { processedOn: at } : {}),
      data: { sessionKey, runId, wokenAt: at === null ? null : new Date(at).toISOString() },
    }),
    state,
  );
}

function letterJob(letter: DeadLetter): ReadyBoardJob {
  return new ReadyBoardJob(
    jobJson({
      id: letter.runId,
      name: letter.sessionKey,
      timestamp: letter.turn?.enqueuedAt ?? letter.failedAt,
      // No start time is kept with a dead letter; without one the board would time it from 1970.
      processedOn: letter.failedAt,
      finishedOn: letter.failedAt,
      attemptsMade: letter.replays,
      failedReason: `${letter.kind}: ${letter.reason}`,
      data: letter.turn ?? { raw: letter.raw },
    }),
    "failed",
  );
}

/** `CLIENT LIST` lines (`id=7 addr=… name=… age=…`) as fields. */
function clientFields(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of line.split(" ")) {
    const eq = part.indexOf("=");
    if (eq > 0) out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

export class ReadyBoardAdapter extends BaseAdapter {
  constructor(private readonly svc: ReadyBoardDeps) {
    super("bullmq", { readOnlyMode: true, allowRetries: false, description: DESCRIPTION });
  }

  getName(): string {
    return READY_BOARD_NAME;
  }
  getStatuses(): Status[] {
    return ["latest", "waiting", "active", "failed"];
  }
  getJobStatuses(): JobStatus[] {
    return ["waiting", "active", "failed"];
  }

  async getJobCounts(): Promise<JobCounts> {
    const { redis, keys } = this.svc;
    const [ready, pending, dead] = await Promise.all([
      redis.llen(keys.readyList()),
      redis.zcard(keys.pendingWakes()),
      redis.hlen(keys.deadLetters()),
    ]);
    return { waiting: ready, active: Math.max(0, pending - ready), failed: dead } as JobCounts;
  }

  async getJobs(statuses: JobStatus[], start = 0, end = 9): Promise<QueueJob[]> {
    const lists = await Promise.all(statuses.map((s) => this.jobsIn(s, start, end)));
    // Several statuses at once (the board's "latest" tab): newest first across them.
    if (lists.length === 1) return lists[0]!;
    return lists.flat().sort((a, b) => b.toJSON().timestamp - a.toJSON().timestamp);
  }

  private async jobsIn(status: JobStatus, start: number, end: number): Promise<ReadyBoardJob[]> {
    const { redis, keys } = this.svc;
    if (status === "waiting") {
      const members = await redis.lrange(keys.readyList(), start, end);
      if (members.length === 0) return [];
      const scores = await redis.zmscore(keys.pendingWakes(), ...members);
      return members.map((m, i) => wakeJob(m, scores[i] == null ? null : Number(scores[i]), "waiting"));
    }
    if (status === "active") {
      const [pending, ready] = await Promise.all([
        redis.zrange(keys.pendingWakes(), 0, LIST_CAP - 1, "WITHSCORES"),
        redis.lrange(keys.readyList(), 0, LIST_CAP - 1),
      ]);
      const waiting = new Set(ready);
      const active: ReadyBoardJob[] = [];
      for (let i = 0; i < pending.length; i += 2) {
        const member = pending[i]!;
        if (!waiting.has(member)) active.push(wakeJob(member, Number(pending[i + 1]), "active"));
      }
      return active.slice(start, end + 1);
    }
    if (status === "failed") {
      // Only the page shown is read (the index range, then its letters), not every letter.
      return (await this.svc.deadLetters.newestFirst(start, end)).map(letterJob);
    }
    return [];
  }

  async getJob(id: string): Promise<QueueJob | null> {
    const letter = await this.svc.deadLetters.get(id);
    if (letter) return letterJob(letter);
    const record = await this.svc.runs.get(id);
    if (!record) return null;
    const member = id + pendingWakeSuffix(record.sessionKey);
    const { redis, keys } = this.svc;
    const [score, position] = await Promise.all([
      redis.zscore(keys.pendingWakes(), member),
      redis.lpos(keys.readyList(), member),
    ]);
    if (score === null && position === null) return null;
    return wakeJob(member, score === null ? null : Number(score), position === null ? "active" : "waiting");
  }

  async getJobLogs(): Promise<string[]> {
    return [];
  }

  /** The ready-list consumers' connections (one Redis; a Cluster's are spread over its nodes: unknown). */
  override async getWorkers(): Promise<QueueWorker[] | null> {
    const { redis, keys } = this.svc;
    if ("nodes" in redis) return null;
    const list = (await redis.client("LIST")) as string;
    const name = readyConsumerName(keys);
    return list
      .split("\n")
      .map(clientFields)
      .filter((c) => c.name === name)
      .map((c) => ({ id: c.id ?? "", name: c.name ?? null, addr: c.addr ?? "", age: Number(c.age ?? 0) }));
  }

  async getRedisInfo(): Promise<string | null> {
    const { redis } = this.svc;
    if ("nodes" in redis) return (await redis.nodes("master")[0]?.info()) ?? null;
    return await redis.info();
  }

  async getMetrics(): Promise<QueueMetrics> {
    return { meta: { count: 0, prevTS: 0, prevCount: 0 }, data: [], count: 0 };
  }
  /** Paused with the `runs` queue: workers then pop nothing from the ready list (src/workers/queue-pauses.ts). */
  async isPaused(): Promise<boolean> {
    return await this.svc.queues.runs.isPaused();
  }
  async getGlobalConcurrency(): Promise<number | null> {
    return null;
  }
  async getJobSchedulers(): Promise<Omit<AppJobScheduler, "queueName">[]> {
    return [];
  }
  async getJobSchedulersCount(): Promise<number> {
    return 0;
  }
  async removeJobScheduler(): Promise<boolean> {
    return false;
  }
  async updateJobScheduler(): Promise<JobSchedulerUpdateResult> {
    return "not-found";
  }
  async runJobSchedulerNow(): Promise<"not-found"> {
    return "not-found";
  }

  // Read-only: the board hides these actions (readOnlyMode), and its API refuses them too.
  async clean(): Promise<void> {
    readOnly();
  }
  async addJob(): Promise<QueueJob> {
    readOnly();
  }
  async pause(): Promise<void> {
    readOnly();
  }
  async resume(): Promise<void> {
    readOnly();
  }
  async empty(): Promise<void> {
    readOnly();
  }
  async obliterate(): Promise<void> {
    readOnly();
  }
  async promoteAll(): Promise<void> {
    readOnly();
  }
  async setGlobalConcurrency(): Promise<void> {
    readOnly();
  }
}
