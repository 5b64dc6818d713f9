/**
 * Transcript storage that refuses writes is waited out, not turned into lost messages.
 *
 * When a turn fails with a storage error the drain parks it (the turn stays in-flight, its
 * drain job is delayed with backoff) and records here:
 * - on the run record: when the fault was first seen for this run (kept across workers and
 *   retries, so the deadline is per run, not per attempt), a human reason that `agent.wait`
 *   and `sessions_send` hand to a caller who stops waiting, and which attempt was parked;
 * - deployment-wide: a health key with a TTL that `/readyz` and `switchboard status` read, and a
 *   counter for `/metrics`. The key expires by itself once no worker reports a fault; the worker
 *   that saw storage come back deletes it at once.
 * One log line per process when storage goes bad and one when it comes back, not one per turn.
 */
import { hostname } from "node:os";
import type { RedisClient } from "../storage/redis-client.js";
import type { Logger } from "pino";
import type { RedisKeys } from "../storage/redis-keys.js";

/** The health key outlives the longest retry pause, so it stays set while a fault lasts. */
const HEALTH_TTL_MS = 120_000;

/** A fault as people read it: Node's fs messages already start with their code ("ENOTDIR: not a …"). */
export function faultText(fault: { code: string; message: string }): string {
  return fault.message.startsWith(`${fault.code}:`) ? fault.message : `${fault.code}: ${fault.message}`;
}

export interface StorageFaultReport {
  code: string;
  message: string;
  /** First time any worker saw this fault (ms). */
  since: number;
  host: string;
  pid: number;
  /** Last report (ms). */
  at: number;
}

export interface ParkDecision {
  /** When this run first hit a storage fault (ms). */
  since: number;
  /** Past the deadline: fail the run and dead-letter its message. */
  expired: boolean;
  reason: string;
}

export class StorageFaults {
  private faulty = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly log: Logger,
    private readonly deadlineMs: number,
  ) {}

  /** Record a storage fault hit by run `runId`; says whether it is still worth waiting. */
  async onFault(runId: string, fault: { code: string; message: string }, now = Date.now()): Promise<ParkDecision> {
    const runKey = this.keys.run(runId);
    const res = await this.redis
      .multi()
      .hsetnx(runKey, "storageFaultSince", String(now))
      .hget(runKey, "storageFaultSince")
      .hincrby(this.keys.stats(), "storage_faults", 1)
      .get(this.keys.storageFault())
      .hget(runKey, "attempts")
      .exec();
    const since = Number(res?.[1]?.[1] ?? now) || now;
    // The attempt parked now (turn-begin counted it): the run's next begin follows a park, not a crash, and is no
    // redelivery; a begin after any other attempt is (src/metrics/turn-metrics.ts). Only the lease holder begins, so
    // the count cannot move between this read and the write below.
    const attempt = (res?.[4]?.[1] as string | null | undefined) ?? null;
    const previous = (res?.[3]?.[1] as string | null | undefined) ?? null;
    const expired = now - since >= this.deadlineMs;
    const until = new Date(since + this.deadlineMs).toISOString();
    const reason = expired
      ? `transcript storage unavailable since ${new Date(since).toISOString()} (${fault.code}): ` +
        `gave up after ${Math.round((now - since) / 60_000)} min`
      : `transcript storage unavailable (${faultText(fault)}); ` + `the run is parked and retried until ${until}`;
    const first = previous ? (JSON.parse(previous) as StorageFaultReport).since : now;
    const report: StorageFaultReport = {
      code: fault.code,
      message: fault.message,
      since: first,
      host: hostname(),
      pid: process.pid,
      at: now,
    };
    await this.redis
      .multi()
      .hset(runKey, "stalledReason", reason, ...(attempt ? ["parkedAttempt", attempt] : []))
      .set(this.keys.storageFault(), JSON.stringify(report), "PX", HEALTH_TTL_MS)
      .exec();
    if (!this.faulty) {
      this.faulty = true;
      this.log.error(
        { code: fault.code, err: fault.message, deadlineMinutes: this.deadlineMs / 60_000 },
        "transcript storage is refusing writes: turns are parked and retried",
      );
    }
    return { since, expired, reason };
  }

  /**
   * Storage failed outside any turn, so there is no run to park: a background fsync of a
   * transcript (group commit, closing a handle; the turns are finished and their lines may not
   * be durable) or the archive of a retired transcript (its job retries). The deployment's health
   * says so until the report expires (about 2 min) unless reported again; a turn that writes fine
   * afterwards does not clear it, since a background write is not a turn's.
   */
  async onBackgroundFault(fault: { code: string; message: string }, now = Date.now()): Promise<void> {
    const previous = await this.redis.get(this.keys.storageFault());
    const report: StorageFaultReport = {
      code: fault.code,
      message: fault.message,
      since: previous ? (JSON.parse(previous) as StorageFaultReport).since : now,
      host: hostname(),
      pid: process.pid,
      at: now,
    };
    await this.redis
      .multi()
      .hincrby(this.keys.stats(), "storage_faults", 1)
      .set(this.keys.storageFault(), JSON.stringify(report), "PX", HEALTH_TTL_MS)
      .exec();
  }

  /** A turn completed: if this process had seen storage fail, it is back. */
  async onSuccess(): Promise<void> {
    if (!this.faulty) return;
    this.faulty = false;
    await this.redis.del(this.keys.storageFault());
    this.log.info("transcript storage is accepting writes again");
  }

  /** The deployment's current storage fault, if any worker reported one recently. */
  static async current(redis: RedisClient, keys: RedisKeys): Promise<StorageFaultReport | null> {
    const raw = await redis.get(keys.storageFault());
    return raw ? (JSON.parse(raw) as StorageFaultReport) : null;
  }
}
