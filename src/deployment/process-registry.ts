/**
 * The Redis-wide registry of running Switchboard processes (`start`, `gateway`, `worker`): each
 * registers a record with its role, host, pid, prefix and config fingerprint, and keeps it alive
 * with a heartbeat; a record whose heartbeat stops (SIGKILL, lost host) expires on its own.
 *
 * What it is for (docs/concepts/deployment-identity.md):
 * - joining is atomic with the check that this process's agents and runtimes match the live
 *   processes of its deployment (same prefix), so a worker with another config never starts
 *   taking that deployment's runs unless started with `--force`;
 * - a process says at start-up which other Switchboard processes share its Redis (any prefix);
 * - `switchboard doctor` reads it for heartbeats and each process's clock skew against Redis.
 *
 * The registry is Redis-wide (keys outside any prefix) precisely so that processes of other
 * prefixes are visible too.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { RedisClient } from "../storage/redis-client.js";
import { luaCommand } from "../storage/lua-script.js";
import { REGISTRY_KEYS } from "../storage/redis-keys.js";
import { SwitchboardError } from "../errors/index.js";
import type { ConfigFingerprint } from "./fingerprint.js";
import { fingerprintDifferences } from "./fingerprint.js";
import { redisTimeMs } from "../storage/redis-time.js";

export { redisTimeMs };

const LUA_DIR = new URL("./lua/", import.meta.url);

/** A record lives this long after its last heartbeat, unless configured (`deployment.registryTtlMs`). */
export const REGISTRY_TTL_MS = 15_000;

/** A process heartbeats three times per TTL: its record survives two missed beats. */
export function heartbeatEveryMs(p: Pick<ProcessRecord, "ttlMs">): number {
  return Math.round((p.ttlMs ?? REGISTRY_TTL_MS) / 3);
}

export type ProcessRole = "start" | "gateway" | "worker";

export interface ProcessRecord {
  id: string;
  role: ProcessRole;
  host: string;
  pid: number;
  version: string;
  prefix: string;
  fingerprint: ConfigFingerprint;
  /** Started with --force despite a differing fingerprint: never the deployment's reference. */
  forced: boolean;
  startedAt: number;
  /** This process's clock minus Redis's (ms), measured at its last heartbeat. */
  skewMs: number;
  gatewayUrl?: string;
  queues?: string[];
  /** Its record's lifetime after a heartbeat (absent in records of versions that had no setting for it). */
  ttlMs?: number;
}

/** A live record as read back, with its last heartbeat on Redis's clock. */
export interface LiveProcess extends ProcessRecord {
  heartbeatAt: number;
}

export class DeploymentMismatchError extends SwitchboardError {
  constructor(
    readonly differences: string[],
    readonly others: ProcessRecord[],
  ) {
    const who = others.map(describeProcess).join(", ");
    super(
      "deployment_mismatch",
      "this config's agents/runtimes/settings differ from the running deployment " +
        `(prefix "${others[0]?.prefix}": ${who}):\n` +
        differences.map((d) => `  - ${d}`).join("\n") +
        "\nStart it with the deployment's config, use another redis.prefix for a separate deployment, " +
        "or pass --force (e.g. while rolling out a config change to every process).",
      { differences },
    );
  }
}

export function describeProcess(p: Pick<ProcessRecord, "role" | "pid" | "host">): string {
  return `${p.role} pid ${p.pid} on ${p.host}`;
}

/** Every live record (heartbeat within the TTL), by Redis's clock. */
export async function listProcesses(redis: RedisClient): Promise<LiveProcess[]> {
  const now = await redisTimeMs(redis);
  const live = await redis.zrangebyscore(REGISTRY_KEYS.expiries, `(${now}`, "+inf", "WITHSCORES");
  if (live.length === 0) return [];
  const ids = live.filter((_, i) => i % 2 === 0);
  const expiry = new Map(ids.map((id, i) => [id, Number(live[i * 2 + 1])]));
  const json = await redis.hmget(REGISTRY_KEYS.records, ...ids);
  const out: LiveProcess[] = [];
  json.forEach((j, i) => {
    if (!j) return;
    try {
      const rec = JSON.parse(j) as ProcessRecord;
      out.push({ ...rec, heartbeatAt: expiry.get(ids[i]!)! - (rec.ttlMs ?? REGISTRY_TTL_MS) });
    } catch {
      // A record some other version wrote in a shape we cannot read: not ours to judge.
    }
  });
  return out.sort((a, b) => a.startedAt - b.startedAt);
}

export interface Registration {
  readonly record: ProcessRecord;
  /** Live processes other than this one at the moment it joined (any prefix). */
  readonly others: LiveProcess[];
  /** Stop heartbeating and remove the record (idempotent). */
  leave(): Promise<void>;
}

/**
 * Join the registry: refuse (DeploymentMismatchError) when a live, unforced process of the same
 * prefix has another fingerprint, unless `force`. Then heartbeat every third of the TTL on
 * `redis` (a connection this registration owns and closes on leave()).
 */
export async function joinRegistry(
  redis: RedisClient,
  init: Omit<ProcessRecord, "id" | "host" | "pid" | "forced" | "startedAt" | "skewMs"> & { force?: boolean },
): Promise<Registration> {
  const join = luaCommand(redis, LUA_DIR, "registry-join");
  const beat = luaCommand(redis, LUA_DIR, "registry-beat");
  const keys = [REGISTRY_KEYS.expiries, REGISTRY_KEYS.records];
  const { force, ...fields } = init;
  const host = hostname();
  const record: ProcessRecord & { ttlMs: number } = {
    ...fields,
    ttlMs: fields.ttlMs ?? REGISTRY_TTL_MS,
    id: `${host}:${process.pid}:${randomBytes(4).toString("hex")}`,
    host,
    pid: process.pid,
    forced: false,
    startedAt: Date.now(),
    skewMs: 0,
  };
  const before = await listProcesses(redis);
  record.skewMs = await measureSkew(redis);
  const tryJoin = async (forced: boolean) => {
    record.forced = forced;
    return (await join(keys, [
      record.id,
      JSON.stringify(record),
      record.ttlMs,
      forced ? "1" : "0",
      record.prefix,
      record.fingerprint.hash,
    ])) as [number, number, ...string[]];
  };
  let answer = await tryJoin(false);
  if (answer[0] === 0) {
    const conflicting = answer.slice(2).map((j) => JSON.parse(j as string) as ProcessRecord);
    if (!force)
      throw new DeploymentMismatchError(
        fingerprintDifferences(record.fingerprint, conflicting[0]!.fingerprint),
        conflicting,
      );
    answer = await tryJoin(true);
  }
  let stopped = false;
  let beating: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    beating = (async () => {
      const t0 = Date.now();
      const serverNow = Number(await beat(keys, [record.id, JSON.stringify(record), record.ttlMs]));
      record.skewMs = Math.round((t0 + Date.now()) / 2 - serverNow);
    })().catch(() => {
      // Redis away: the record may expire meanwhile; the next beat puts it back.
    });
  }, heartbeatEveryMs(record));
  timer.unref();
  return {
    record,
    others: before.filter((p) => p.id !== record.id),
    async leave() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await beating;
      await redis
        .multi()
        .zrem(REGISTRY_KEYS.expiries, record.id)
        .hdel(REGISTRY_KEYS.records, record.id)
        .exec()
        .catch(() => {});
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** This clock minus Redis's (ms), from the midpoint of a TIME round trip. */
export async function measureSkew(redis: RedisClient): Promise<number> {
  const t0 = Date.now();
  const server = await redisTimeMs(redis);
  return Math.round((t0 + Date.now()) / 2 - server);
}
