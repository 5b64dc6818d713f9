/**
 * The deployment's state as `switchboard status` shows it: Redis, queue depths, workers, the
 * ready list, storage health, dead letters, recent sessions and registered processes. The CLI
 * builds it against Redis directly, and a gateway answers it as the `status` RPC method, so
 * `status --url <gateway>` reports the deployment that gateway serves, not the local config's.
 */
import type { Config } from "../config/schema.js";
import { displayRedisUrl } from "../config/redis-url.js";
import { listProcesses } from "../deployment/process-registry.js";
import { QUEUE_NAMES } from "../queues/queue-names.js";
import type { Queues } from "../queues/queues.js";
import type { DeadLetters } from "../runs/dead-letters.js";
import { StorageFaults } from "../runs/storage-faults.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { SessionStore } from "../storage/session-store.js";

export interface StatusDeps {
  config: Config;
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
  deadLetters: DeadLetters;
  sessions: SessionStore;
}

export interface DeploymentStatus {
  redis: { url: string; prefix: string; up: boolean; pingMs?: number; error?: string };
  queues?: Record<string, Record<string, number>>;
  /** The default wake-up is not a BullMQ job (docs/design/runs.md, "Wake-ups"): its backlog. */
  ready?: { sessions: number; pendingWakes: number };
  workers?: number;
  storage?: { healthy: boolean; code?: string; message?: string; since?: number };
  deadLetters?: number;
  sessions?: { key: string; updatedAt: number }[];
  processes?: {
    role: string;
    host: string;
    pid: number;
    version: string;
    startedAt: number;
    heartbeatAt: number;
    forced?: boolean;
  }[];
}

async function queueCounts(svc: StatusDeps): Promise<Record<string, Record<string, number>>> {
  const queues: Record<string, Record<string, number>> = {};
  for (const name of QUEUE_NAMES) {
    const q = svc.queues[name];
    queues[name] = {
      ...(await q.getJobCounts("waiting", "active", "delayed", "failed", "completed")),
      workers: await q.getWorkersCount(),
      // Only when paused (an older gateway's answer has no such field either).
      ...((await q.isPaused()) ? { paused: 1 } : {}),
    };
  }
  return queues;
}

async function processesOf(svc: StatusDeps): Promise<NonNullable<DeploymentStatus["processes"]>> {
  return (await listProcesses(svc.redis))
    .filter((p) => p.prefix === svc.config.redis.prefix)
    .map((p) => ({
      role: p.role,
      host: p.host,
      pid: p.pid,
      version: p.version,
      startedAt: p.startedAt,
      heartbeatAt: p.heartbeatAt,
      ...(p.forced ? { forced: true } : {}),
    }));
}

/** Everything Redis says, in `out`; throws when Redis stops answering part way. */
async function fill(svc: StatusDeps, out: DeploymentStatus): Promise<void> {
  const started = Date.now();
  await svc.redis.ping();
  out.redis.up = true;
  out.redis.pingMs = Date.now() - started;
  const queues = await queueCounts(svc);
  out.queues = queues;
  out.ready = {
    sessions: await svc.redis.llen(svc.keys.readyList()),
    pendingWakes: await svc.redis.zcard(svc.keys.pendingWakes()),
  };
  out.workers = Math.max(...Object.values(queues).map((q) => q.workers ?? 0));
  const fault = await StorageFaults.current(svc.redis, svc.keys);
  out.storage = fault
    ? { healthy: false, code: fault.code, message: fault.message, since: fault.since }
    : { healthy: true };
  out.deadLetters = await svc.deadLetters.count();
  out.sessions = (await svc.sessions.list({ limit: 5 })).map((s) => ({ key: s.key, updatedAt: s.updatedAt }));
  out.processes = await processesOf(svc);
}

/**
 * The status of the deployment `svc` is wired to. A Redis that does not answer is part of the
 * answer (`redis.up: false` and why, `describeError` saying it better than the error's message
 * where it can), not an error.
 */
export async function deploymentStatus(
  svc: StatusDeps,
  describeError?: (err: unknown) => string | undefined,
): Promise<DeploymentStatus> {
  const out: DeploymentStatus = {
    redis: { url: displayRedisUrl(svc.config.redis.url), prefix: svc.config.redis.prefix, up: false },
  };
  try {
    await fill(svc, out);
  } catch (err) {
    out.redis.up = false;
    out.redis.error = describeError?.(err) ?? (err as Error).message;
  }
  return out;
}
