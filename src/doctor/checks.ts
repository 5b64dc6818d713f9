/**
 * The checks behind `switchboard doctor`, each returning findings (doctor/report.ts). They look,
 * never change anything, except a probe file written and removed in the state dir.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { probeConnection } from "../queues/redis-connections.js";
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { DeadLetters } from "../runs/dead-letters.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { QUEUE_NAMES } from "../queues/queue-names.js";
import { faultText, StorageFaults } from "../runs/storage-faults.js";
import { configFingerprint, fingerprintDifferences, type ConfigFingerprint } from "../deployment/fingerprint.js";
import {
  describeProcess,
  heartbeatEveryMs,
  listProcesses,
  measureSkew,
  type LiveProcess,
} from "../deployment/process-registry.js";
import { filesystemNote, filesystemOf, formatBytes } from "./filesystem.js";
import type { Finding } from "./report.js";
import { displayRedisUrl } from "../config/redis-url.js";
import { REDIS_NEARLY_FULL_RATIO, redisMemory, type RedisMemory } from "../errors/index.js";
import { findStrandedSessions } from "../workers/stranded-sessions.js";
import { redisTimeMs } from "../storage/redis-time.js";

/** Clocks further apart than this make run timestamps and daily/idle resets disagree between hosts. */
export const MAX_CLOCK_SKEW_MS = 1000;
/** Below BullMQ's minimum it refuses to run; below the recommended one some features degrade. */
/** Switchboard's scripts use LMOVE and LPOP with a count, both new in Redis 6.2. */
const REDIS_MIN = "6.2.0";
const LOW_DISK_BYTES = 1024 ** 3;
/** How many of the sessions that may have work doctor looks at (those recorded longest ago). */
const STRANDED_SCAN = 1000;

export function versionBelow(version: string, min: string): boolean {
  const a = version.split(".").map((n) => parseInt(n, 10) || 0);
  const b = min.split(".").map((n) => parseInt(n, 10) || 0);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return false;
}

/** `field:value` lines of INFO. */
export function infoField(info: string, field: string): string | undefined {
  const line = info.split(/\r?\n/).find((l) => l.startsWith(`${field}:`));
  return line?.slice(field.length + 1).trim();
}

/**
 * A Redis connection that fails at once instead of retrying, and a Redis that takes the
 * connection but does not answer within `timeoutMs` fails too (doctor reports, it does not wait).
 */
export async function probeRedis(url: string, timeoutMs = 3000): Promise<{ redis?: RedisClient; error?: string }> {
  // A cluster URL (redis+cluster://) gets a Cluster client, with the same fail-fast settings per node.
  return await probeConnection(url, timeoutMs);
}

export async function checkRedis(redis: RedisClient, url: string): Promise<Finding[]> {
  const t0 = performance.now();
  await redis.ping();
  const pingMs = Math.round(performance.now() - t0);
  const info = await redis.info();
  const version = infoField(info, "valkey_version") ?? infoField(info, "redis_version") ?? "unknown";
  const policy = infoField(info, "maxmemory_policy") ?? "unknown";
  const memory = redisMemory(info);
  const used = memory?.maxBytes
    ? `, used ${formatBytes(memory.usedBytes)} of maxmemory ${formatBytes(memory.maxBytes)}`
    : "";
  const out: Finding[] = [
    {
      check: "redis",
      level: "ok",
      message: `${displayRedisUrl(url)}: Redis ${version}, ping ${pingMs} ms, maxmemory-policy ${policy}${used}`,
    },
  ];
  if (version !== "unknown" && versionBelow(version, REDIS_MIN)) {
    out.push({
      check: "redis",
      level: "fail",
      message: `Redis ${version} is older than ${REDIS_MIN}, which Switchboard's scripts need (LMOVE, LPOP count)`,
      fix: `upgrade Redis (${REDIS_MIN} or newer)`,
    });
  }
  if (policy !== "noeviction" && policy !== "unknown") {
    out.push({
      check: "redis",
      level: "fail",
      message:
        `maxmemory-policy is ${policy}: ` +
        `Redis may evict queue jobs, leases and session entries under memory pressure`,
      fix: "CONFIG SET maxmemory-policy noeviction (and put it in redis.conf)",
    });
  }
  out.push(...judgeRedisMemory(memory));
  return out;
}

const MEMORY_FIX =
  "raise maxmemory (CONFIG SET maxmemory <bytes>, and in redis.conf) or free memory " +
  "(switchboard deadletters, session.maintenance; docs/concepts/reliability.md)";

/**
 * How full Redis is (INFO: used_memory, maxmemory, errorstat_OOM). At maxmemory Redis refuses
 * every write (`OOM …`), so no message can be queued: a failure. So is being near it (90 %) while
 * Redis has refused writes for it: memory hovers at the edge and writes fail now and then. Near
 * it alone is a warning, and so are refusals counted while memory is low now (they happened
 * since Redis started or its last CONFIG RESETSTAT, and may be long over).
 */
export function judgeRedisMemory(memory: RedisMemory | undefined): Finding[] {
  if (!memory?.ratio) return [];
  const { usedBytes, maxBytes, ratio, oomRefusals } = memory;
  const pct = `${Math.floor(ratio * 100)} %`;
  const of = `${formatBytes(usedBytes)} used of maxmemory ${formatBytes(maxBytes)} (${pct})`;
  const refused = oomRefusals
    ? `Redis has refused ${oomRefusals} write${oomRefusals === 1 ? "" : "s"} for maxmemory`
    : "";
  if (ratio >= 1)
    return [
      {
        check: "redis",
        level: "fail",
        message: `Redis is out of memory: ${of}; every write is refused, no message can be queued`,
        fix: MEMORY_FIX,
      },
    ];
  if (ratio >= REDIS_NEARLY_FULL_RATIO)
    return [
      {
        check: "redis",
        level: oomRefusals ? "fail" : "warn",
        message: `Redis is nearly full: ${of}${refused ? `; ${refused}` : ""}`,
        fix: MEMORY_FIX,
      },
    ];
  if (oomRefusals)
    return [
      {
        check: "redis",
        level: "warn",
        message: `${refused} since it started or its last CONFIG RESETSTAT; now ${of}`,
        fix: "see what filled it (it may be over); CONFIG RESETSTAT clears the count",
      },
    ];
  return [];
}

export function checkStorage(config: Config): Finding[] {
  const dir = config.storage.dir;
  const probe = join(dir, `.doctor-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: true });
    const fd = openSync(probe, "w");
    try {
      writeSync(fd, "switchboard doctor\n");
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (readFileSync(probe, "utf8") !== "switchboard doctor\n")
      throw new Error("read back something else than was written");
  } catch (err) {
    return [
      {
        check: "storage",
        level: "fail",
        message: `${dir} is not writable: ${(err as Error).message}`,
        fix: "fix the permissions or the mount of storage.dir (SWITCHBOARD_STATE_DIR)",
      },
    ];
  } finally {
    try {
      rmSync(probe, { force: true });
    } catch {
      // Nothing was written (the dir is not there or not a dir): nothing to remove.
    }
  }
  const fs = filesystemOf(dir);
  const note = filesystemNote(fs.type);
  const out: Finding[] = [
    {
      check: "storage",
      level: "ok",
      message:
        `${dir} writable, ${fs.type}, ${formatBytes(fs.freeBytes)} free of ` +
        `${formatBytes(fs.totalBytes)}${note?.level === "ok" ? ` (${note.note})` : ""}`,
    },
  ];
  if (note?.level === "warn")
    out.push({
      check: "storage",
      level: "warn",
      message: `${fs.type}: ${note.note}`,
      fix: "put storage.dir on a persistent disk or volume",
    });
  if (fs.freeBytes < LOW_DISK_BYTES)
    out.push({
      check: "storage",
      level: "warn",
      message: `only ${formatBytes(fs.freeBytes)} free`,
      fix: "free space: when writes fail, turns are parked and then dead-lettered",
    });
  return out;
}

/** What the Redis-side checks read. */
export interface DoctorDeps {
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
  deadLetters: DeadLetters;
}

/** The fault workers publish while transcript writes fail (read by /readyz too). */
export async function checkStorageFault(svc: DoctorDeps): Promise<Finding[]> {
  const fault = await StorageFaults.current(svc.redis, svc.keys);
  if (!fault) return [];
  return [
    {
      check: "storage",
      level: "fail",
      message:
        `workers report transcript writes failing since ${new Date(fault.since).toISOString()} ` +
        `(${faultText(fault)}); turns are parked`,
      fix: "fix the storage on the workers' hosts; parked turns resume by themselves",
    },
  ];
}

/** A wake pending this long was not taken by any worker: a worker that pops the ready list is missing. */
const WAKE_STUCK_MS = 60_000;

export async function checkQueues(svc: DoctorDeps, now = Date.now()): Promise<Finding[]> {
  const out: Finding[] = [];
  const parts: string[] = [];
  let runsPaused = false;
  for (const name of QUEUE_NAMES) {
    const q = svc.queues[name];
    const c = await q.getJobCounts("waiting", "active", "failed");
    const workers = await q.getWorkersCount();
    parts.push(
      `${name} ${workers} worker${workers === 1 ? "" : "s"}, ${c.waiting ?? 0} waiting, ${c.failed ?? 0} failed`,
    );
    if (await q.isPaused()) {
      if (name === "runs") runsPaused = true;
      const held = name === "runs" || name === "subagents" ? "no turn of its sessions begins" : "none of its jobs runs";
      out.push({
        check: "queues",
        level: "warn",
        message: `${name} is paused: ${held} until resumed`,
        fix: `resume it in Bull Board (/admin/queues/queue/${name})`,
      });
    }
    if ((c.failed ?? 0) > 0) {
      out.push({
        check: "queues",
        level: "warn",
        message: `${name}: ${c.failed} failed job${c.failed === 1 ? "" : "s"}`,
        fix: "look at them in Bull Board (/admin/queues); dead letters: switchboard deadletters",
      });
    }
    if (name === "runs" && workers === 0) {
      out.push({
        check: "queues",
        level: "fail",
        message: "no worker consumes the runs queue: messages are queued but no turn runs",
        fix: "start one: switchboard worker (or switchboard start)",
      });
    }
  }
  // Ready-list wakes are not jobs (docs/design/runs.md, "Wake-ups"): their backlog, and wakes
  // no worker took for a minute (the overdue check would have re-armed them as drain jobs).
  const ready = await svc.redis.llen(svc.keys.readyList());
  parts.push(`ready list ${ready}`);
  const stuck = await svc.redis.zcount(svc.keys.pendingWakes(), "-inf", now - WAKE_STUCK_MS);
  if (stuck > 0)
    out.push({
      check: "queues",
      level: "warn",
      message: `${stuck} session${stuck === 1 ? "" : "s"} woken over a minute ago and not drained yet`,
      fix:
        (runsPaused ? "the runs queue is paused (resume it), or " : "") +
        "every worker busy (add workers), or none pops the ready list: workers older than the " +
        "gateways (upgrade workers first), or none runs the runs queue; Bull Board's `ready` queue " +
        "lists them (/admin/queues/queue/ready)",
    });
  // Sessions with turns and no drainer (a drain job removed in Bull Board): the sweep re-arms them.
  const { stranded } = await findStrandedSessions(svc, STRANDED_SCAN);
  if (stranded.length > 0)
    out.push({
      check: "queues",
      level: "warn",
      message:
        `${stranded.length} session${stranded.length === 1 ? "" : "s"} with queued turns and no drainer ` +
        `(a drain job removed?): ${stranded.slice(0, 5).join(", ")}${stranded.length > 5 ? ", …" : ""}`,
      fix:
        "the maintenance sweep re-arms them within a sweep interval (maintenance.sweepEveryMs) plus 30 s; " +
        "if they stay, check that a worker runs the maintenance queue",
    });
  const dead = await svc.deadLetters.count();
  if (dead > 0)
    out.push({
      check: "queues",
      level: "warn",
      message: `${dead} dead letter${dead === 1 ? "" : "s"}`,
      fix: "switchboard deadletters (list, replay, discard); Bull Board shows them as the `ready` queue's failed",
    });
  return [{ check: "queues", level: "ok", message: parts.join("; ") }, ...out];
}

/** Live processes of this prefix: do they agree on agents, runtimes and settings, with each other and this config? */
export function judgeProcesses(config: Config, all: LiveProcess[], nowMs: number): Finding[] {
  const mine = all.filter((p) => p.prefix === config.redis.prefix);
  const otherPrefixes = [...new Set(all.filter((p) => p.prefix !== config.redis.prefix).map((p) => p.prefix))];
  const roles = new Map<string, number>();
  for (const p of mine) roles.set(p.role, (roles.get(p.role) ?? 0) + 1);
  const summary = mine.length ? [...roles].map(([r, n]) => `${n} ${r}${n === 1 ? "" : "s"}`).join(", ") : "none";
  const out: Finding[] = [
    {
      check: "processes",
      level: "ok",
      message:
        `prefix "${config.redis.prefix}": ${summary}` +
        (otherPrefixes.length
          ? `; other prefixes on this Redis: ${otherPrefixes.map((p) => `"${p}"`).join(", ")}`
          : ""),
    },
  ];
  const byHash = new Map<string, LiveProcess[]>();
  for (const p of mine) byHash.set(p.fingerprint.hash, [...(byHash.get(p.fingerprint.hash) ?? []), p]);
  if (byHash.size > 1) {
    const groups = [...byHash.values()].sort((a, b) => b.length - a.length);
    const ref = groups[0]![0]!.fingerprint;
    for (const g of groups.slice(1)) {
      out.push({
        check: "processes",
        level: "fail",
        message:
          `${g.map(describeProcess).join(", ")} run${g.length === 1 ? "s" : ""} other agents/runtimes/settings than ` +
          `${groups[0]!.map(describeProcess).join(", ")}: ` +
          `${fingerprintDifferences(g[0]!.fingerprint, ref).join("; ")}`,
        fix: "restart them with one config",
      });
    }
  }
  const here: ConfigFingerprint = configFingerprint(config);
  const reference = mine.find((p) => !p.forced)?.fingerprint;
  if (reference && reference.hash !== here.hash) {
    const differences = fingerprintDifferences(here, reference).join("; ");
    out.push({
      check: "processes",
      level: "warn",
      message: `this config differs from the running deployment's: ${differences}`,
      fix: "a worker or gateway started with it would be refused (or pass --force)",
    });
  }
  const versions = [...new Set(mine.map((p) => p.version))];
  if (versions.length > 1)
    out.push({
      check: "processes",
      level: "warn",
      message: `mixed versions: ${versions.join(", ")}`,
      fix: "finish the rolling upgrade",
    });
  for (const p of mine) {
    const age = nowMs - p.heartbeatAt;
    const every = heartbeatEveryMs(p);
    if (age > 2 * every) {
      out.push({
        check: "processes",
        level: "warn",
        message:
          `${describeProcess(p)}: last heartbeat ${Math.round(age / 1000)} s ago ` +
          `(every ${every / 1000} s expected)`,
        fix: "a blocked event loop or a flaky Redis link on that host",
      });
    }
  }
  return out;
}

/** This host's clock and every registered process's against Redis's TIME. */
export function judgeClocks(localSkewMs: number, processes: LiveProcess[]): Finding[] {
  const out: Finding[] = [];
  const ahead = (ms: number) => (ms >= 0 ? `${ms} ms ahead of` : `${-ms} ms behind`);
  const worst = processes.reduce((m, p) => Math.max(m, Math.abs(p.skewMs)), 0);
  out.push({
    check: "clock",
    level: "ok",
    message:
      `this host is ${ahead(localSkewMs)} ` +
      `Redis${processes.length ? `; registered processes within ${worst} ms of it` : ""}`,
  });
  const fix = "synchronise the clocks (NTP: chrony or systemd-timesyncd)";
  if (Math.abs(localSkewMs) > MAX_CLOCK_SKEW_MS)
    out.push({
      check: "clock",
      level: "fail",
      message: `this host is ${ahead(localSkewMs)} Redis (over ${MAX_CLOCK_SKEW_MS} ms)`,
      fix,
    });
  for (const p of processes) {
    if (Math.abs(p.skewMs) > MAX_CLOCK_SKEW_MS)
      out.push({
        check: "clock",
        level: "fail",
        message: `${describeProcess(p)} is ${ahead(p.skewMs)} Redis (over ${MAX_CLOCK_SKEW_MS} ms)`,
        fix,
      });
  }
  return out;
}

export async function checkDeployment(redis: RedisClient, config: Config): Promise<Finding[]> {
  const [all, localSkew] = await Promise.all([listProcesses(redis), measureSkew(redis)]);
  const now = await redisTimeMs(redis);
  return [...judgeProcesses(config, all, now), ...judgeClocks(localSkew, all)];
}

/** What to do when the gateway refuses the CLI's token. */
const TOKEN_FIX = "set --token / SWITCHBOARD_TOKEN / gateway.auth.token to the gateway's token";

/**
 * One cheap authenticated call (`sessions.list`, one row): /readyz needs no token, so a gateway
 * can be ready and still refuse every command the CLI would send it.
 */
async function tokenFinding(base: string, token: string | undefined): Promise<Finding | undefined> {
  const res = await fetch(`${base}/v1/rpc/sessions.list`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ limit: 1 }),
    signal: AbortSignal.timeout(3000),
  });
  await res.body?.cancel();
  if (res.status !== 401) return undefined;
  return {
    check: "gateway",
    level: "fail",
    message: `${base} is ready but refused ${token ? "the token" : "a request without a token"} (401)`,
    fix: `token refused → ${TOKEN_FIX}`,
  };
}

/**
 * `/readyz` of the gateway at `base`, then whether it takes `token`. `implicit`: the gateway was
 * not named (no --url, $SWITCHBOARD_URL or runtime file) but is where the config says one
 * listens; none answering there is a warning, since the CLI then reads Redis directly.
 */
export async function checkGateway(base: string, token?: string, implicit = false): Promise<Finding[]> {
  try {
    const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3000) });
    const body = (await res.json().catch(() => ({}))) as { error?: string };
    if (!res.ok)
      return [
        {
          check: "gateway",
          level: "fail",
          message: `${base}/readyz answered ${res.status}${body.error ? `: ${body.error}` : ""}`,
          fix: "see that gateway's log; switchboard status",
        },
      ];
    const refused = await tokenFinding(base, token);
    return [refused ?? { check: "gateway", level: "ok", message: `${base} ready` }];
  } catch (err) {
    return [unreachable(base, err, implicit)];
  }
}

function unreachable(base: string, err: unknown, implicit: boolean): Finding {
  const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
  if (implicit)
    return {
      check: "gateway",
      level: "warn",
      message: `no gateway answers at ${base} (gateway.host/port; ${cause}): send needs one`,
      fix: "start one (switchboard gateway, or switchboard start); on a workers-only host ignore this",
    };
  return {
    check: "gateway",
    level: "fail",
    message: `${base} does not answer (${cause})`,
    fix: "start it (switchboard gateway) or fix --url / SWITCHBOARD_URL",
  };
}

/** `--alive <role>`: is a process of that role on this host registered with a fresh heartbeat? */
export function judgeAlive(
  role: string,
  host: string,
  prefix: string,
  processes: LiveProcess[],
  nowMs: number,
): Finding {
  const match = processes.filter(
    (p) => p.host === host && p.prefix === prefix && (role === "any" || p.role === role || p.role === "start"),
  );
  const fresh = match.filter((p) => nowMs - p.heartbeatAt <= 2 * heartbeatEveryMs(p));
  if (fresh.length)
    return {
      check: "alive",
      level: "ok",
      message:
        `${fresh.map(describeProcess).join(", ")}: heartbeat ` +
        `${Math.round((nowMs - fresh[0]!.heartbeatAt) / 1000)} s ago`,
    };
  if (match.length)
    return {
      check: "alive",
      level: "fail",
      message:
        `${describeProcess(match[0]!)} has not sent a heartbeat for ` +
        `${Math.round((nowMs - match[0]!.heartbeatAt) / 1000)} s`,
      fix: "it is stuck: restart it",
    };
  return {
    check: "alive",
    level: "fail",
    message: `no switchboard ${role} process of prefix "${prefix}" registered from host ${host}`,
    fix: "it is not running, or cannot reach Redis",
  };
}
