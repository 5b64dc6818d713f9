/**
 * The stranded-session check (docs/design/runs.md, "Stranded sessions"): the net under the
 * wake-ups for what no wake-up sees. A session with turns queued or in flight is woken once, by
 * the push that found it idle; after that its drainer (a drain job, a ready-list drain) carries
 * it until its inbox is empty. An operator who removes that drain job in Bull Board (delayed on a
 * parked turn or a lease wait, waiting in a paused queue, active after its worker was killed)
 * leaves the session with turns and nobody to run them: its pending wake was cleared when the
 * drainer took the turn, and a later push finds the session busy and wakes nobody.
 *
 * So every idle push also records its session in `work:sessions` (push-turn.lua; one ZADD, on
 * that push only), and the maintenance sweep looks at the sessions recorded longest ago, in
 * batches of `maintenance.sweepBatch`: one with nothing left leaves the set; one whose lease is
 * held has a drainer; one whose lease is free keeps its drain job if it has one (waiting,
 * delayed, active, …: a parked turn's delayed job counts) or a pending wake (the overdue check
 * re-arms those), and otherwise gets a drain job, with a warning. A redundant drain job costs an
 * empty drain at most: it is deduplicated per session, and a drainer arriving second finds the
 * lease held or the inbox empty.
 */
import { queueOf } from "../queues/jobs.js";
import type { Queues } from "../queues/queues.js";
import { requestDrain } from "../runs/enqueue.js";
import { wakeSession } from "../runs/pending-wakes.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { wakeOverdueMs } from "./overdue-wakes.js";
import type { WorkerDeps } from "./worker-deps.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

/**
 * How long a session stays in the set before it is looked at: three times the overdue-wake
 * threshold (30 s by default), so a push's own wake-up is long done and the overdue check, which
 * re-arms a lost wake, has had its turn first.
 */
export function strandedGraceMs(config: Parameters<typeof wakeOverdueMs>[0]): number {
  return 3 * wakeOverdueMs(config);
}

/** The stats hash field counting the sessions this check re-armed. */
export const STRANDED_STAT = "sessions_stranded_rearmed";

/** A pending-wakes set larger than this is not read to look for a session's wake (it gets a drain job then). */
const MAX_WAKES_SCAN = 10_000;

/** What a drain job can be in while it is still going to drain its session. */
const LIVE_STATES = new Set(["active", "waiting", "delayed", "prioritized", "waiting-children"]);

/** Answers of stranded-check.lua. */
const IDLE = 0;
const LEASE_FREE = 2;

interface StrandedDeps {
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
}

/**
 * Whether the session has a drain job that is still going to run: drain jobs are deduplicated
 * per session (src/queues/jobs.ts), so the deduplication id names the one there is.
 */
async function hasDrainJob(svc: Pick<StrandedDeps, "queues">, sessionKey: string): Promise<boolean> {
  const queue = svc.queues[queueOf("drain", { sessionKey })];
  const id = await queue.getDeduplicationJobId(sessionKey);
  return id !== null && LIVE_STATES.has(await queue.getJobState(id));
}

/** Sessions with a pending wake (the overdue check re-arms those), or null when there are too many to read. */
async function sessionsWithPendingWake(svc: StrandedDeps): Promise<Set<string> | null> {
  const key = svc.keys.pendingWakes();
  if ((await svc.redis.zcard(key)) > MAX_WAKES_SCAN) return null;
  return new Set((await svc.redis.zrange(key, 0, MAX_WAKES_SCAN - 1)).map(wakeSession));
}

/**
 * Of sessions with work and a free lease, those with neither a drain job nor a pending wake. The
 * job lookups go out together (one connection pipelines them), not one round trip each.
 */
async function withoutDrainer(svc: StrandedDeps, sessions: string[]): Promise<string[]> {
  if (sessions.length === 0) return [];
  const waking = await sessionsWithPendingWake(svc);
  const unwoken = sessions.filter((key) => !waking?.has(key));
  const jobs = await Promise.all(unwoken.map((key) => hasDrainJob(svc, key)));
  return unwoken.filter((_, i) => !jobs[i]);
}

export interface StrandedResult {
  /** Sessions looked at. */
  examined: number;
  /** Found with nothing queued or in flight: removed from the set. */
  idle: number;
  /** Found with turns and no drainer: given a drain job. */
  rearmed: number;
}

/**
 * The sweep's check: batches of `maintenance.sweepBatch`, oldest first, of the sessions recorded
 * longer than the grace ago, while batches come back full and `budgetMs` is not spent. Each
 * session looked at is removed (idle) or given the time now, so the next batch reads others.
 */
export async function repairStrandedSessions(svc: WorkerDeps, budgetMs: number): Promise<StrandedResult> {
  const check = luaCommand(svc.redis, LUA_DIR, "stranded-check");
  const batch = svc.config.maintenance.sweepBatch;
  const graceMs = strandedGraceMs(svc.config);
  const total: StrandedResult = { examined: 0, idle: 0, rearmed: 0 };
  const started = Date.now();
  for (;;) {
    const now = await svc.wakes.now();
    const sessions = await svc.redis.zrangebyscore(svc.keys.workSessions(), "-inf", now - graceMs, "LIMIT", 0, batch);
    if (sessions.length === 0) break;
    const keys = [svc.keys.workSessions()];
    for (const s of sessions) keys.push(svc.keys.inbox(s), svc.keys.inflight(s), svc.keys.lease(s));
    const codes = (await check(keys, sessions)) as number[];
    total.examined += sessions.length;
    total.idle += codes.filter((c) => c === IDLE).length;
    const stranded = await withoutDrainer(
      svc,
      sessions.filter((_, i) => codes[i] === LEASE_FREE),
    );
    for (const sessionKey of stranded) {
      await requestDrain(svc, sessionKey);
      await svc.redis.hincrby(svc.keys.stats(), STRANDED_STAT, 1);
      svc.log.warn({ sessionKey }, "re-armed a session with queued turns and no drainer (a drain job removed?)");
      total.rearmed++;
    }
    if (sessions.length < batch || Date.now() - started >= budgetMs) break;
  }
  return total;
}

/**
 * Read only, for `switchboard doctor`: the sessions stranded right now among the `limit`
 * recorded longest ago (turns queued or in flight, lease free, no drain job, no pending wake),
 * and how many were looked at.
 */
export async function findStrandedSessions(
  svc: StrandedDeps,
  limit: number,
): Promise<{ examined: number; stranded: string[] }> {
  const sessions = await svc.redis.zrange(svc.keys.workSessions(), 0, limit - 1);
  if (sessions.length === 0) return { examined: 0, stranded: [] };
  const pipe = svc.redis.pipeline();
  for (const s of sessions) pipe.llen(svc.keys.inbox(s)).llen(svc.keys.inflight(s)).exists(svc.keys.lease(s));
  const replies = (await pipe.exec()) ?? [];
  const value = (i: number) => {
    const [err, v] = replies[i] ?? [new Error("no reply"), null];
    if (err) throw err;
    return Number(v);
  };
  const leaseFree = sessions.filter((_, i) => value(i * 3) + value(i * 3 + 1) > 0 && value(i * 3 + 2) === 0);
  return { examined: sessions.length, stranded: await withoutDrainer(svc, leaseFree) };
}
