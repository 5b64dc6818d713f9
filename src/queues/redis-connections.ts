/**
 * ioredis clients by role: workers and subscribers retry forever
 * (`maxRetriesPerRequest: null`, required by BullMQ's blocking calls); producers (a gateway's
 * commands, BullMQ Queues) give up after one retry so a request fails fast while Redis is away,
 * and on a command Redis took but did not answer within `PRODUCER_COMMAND_TIMEOUT_MS` (a hung
 * or paused server, a network partition), so a request ends with 503 `unavailable` instead of
 * waiting for ever; the CLI's connections give up on an unanswered command too, sooner, so an
 * operator command ends with the reason instead of hanging.
 *
 * `redis.url` names one Redis or a Redis Cluster (redis+cluster://…): the same roles and options
 * apply to either, for a Cluster on each node connection (docs/concepts/redis-cluster.md).
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { parseRedisUrl } from "../config/redis-url.js";
import type { RedisClient } from "../storage/redis-client.js";

export type ConnectionRole = "worker" | "producer" | "subscriber" | "cli";

/**
 * How long a CLI command waits for Redis's answer. Never for workers or subscribers: BullMQ's
 * blocking commands wait on purpose, and a busy Redis must slow a worker down, not fail its turns.
 */
export const CLI_COMMAND_TIMEOUT_MS = 5000;

/**
 * How long a producer connection (a gateway's commands, and every process's BullMQ Queue
 * connection, which only adds and reads jobs) waits for Redis's answer before the command fails
 * with "Command timed out" (a 503 `unavailable` at the doors). Without it a request waiting on a
 * hung or partitioned Redis waited for ever, holding its body and its queued commands. Nothing
 * blocks on these connections (BLPOP and BullMQ's workers have "worker" connections, run-done
 * waits a "subscriber" one with their own timers) and none of their commands takes long, so 10 s
 * is far above a healthy answer and under a client's usual timeout. A command that timed out may
 * still be carried out when Redis resumes (docs/concepts/reliability.md).
 */
export const PRODUCER_COMMAND_TIMEOUT_MS = 10_000;

/** What a Redis that took the connection but did not answer in time may be. */
export const NO_REPLY = "connected but no reply (hung, busy, or not Redis)";

/**
 * Options for the server, or for each node of a Cluster (`enableOfflineQueue` then applies to
 * the Cluster itself: it queues commands until its slot map is known).
 */
export type NodeOptions = NonNullable<ClusterOptions["redisOptions"]> & Pick<RedisOptions, "enableOfflineQueue">;

/**
 * A client for `url`: `Redis` for redis:// and rediss://, `Cluster` for the +cluster forms.
 * `node` applies to the server (or each cluster node); `retry` is the reconnect schedule (the
 * Cluster's `clusterRetryStrategy`); `cluster` adds Cluster-only options.
 */
export function openRedis(
  url: string,
  node: NodeOptions,
  retry: (times: number) => number | null,
  cluster: Omit<ClusterOptions, "redisOptions" | "clusterRetryStrategy"> = {},
): RedisClient {
  const target = parseRedisUrl(url);
  if (target.kind === "single") return new Redis(url, { ...node, retryStrategy: retry } satisfies RedisOptions);
  const { enableOfflineQueue, ...perNode } = node;
  return new Cluster(target.nodes, {
    ...cluster,
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    clusterRetryStrategy: retry,
    redisOptions: {
      ...perNode,
      ...(target.username ? { username: target.username } : {}),
      ...(target.password ? { password: target.password } : {}),
      ...(target.tls ? { tls: {} } : {}),
    },
  });
}

/**
 * `name` is the connection's CLIENT SETNAME (default `switchboard-<role>`), set again on every
 * reconnect: a name others look for (the ready-list consumers, which Bull Board lists as the
 * ready list's workers) must be given here.
 */
export function createRedis(url: string, role: ConnectionRole, log?: Logger, name?: string): RedisClient {
  const r = openRedis(
    url,
    {
      maxRetriesPerRequest: role === "producer" || role === "cli" ? 1 : null,
      // A closed CLI connection to a server that never answers is not kept waiting for its FIN
      // either (ioredis waits 2 s by default), so the command exits once it has its answer.
      ...(role === "cli" ? { commandTimeout: CLI_COMMAND_TIMEOUT_MS, disconnectTimeout: 200 } : {}),
      ...(role === "producer" ? { commandTimeout: PRODUCER_COMMAND_TIMEOUT_MS } : {}),
      enableReadyCheck: true,
      connectionName: name ?? `switchboard-${role}`,
      // A subscriber subscribes again itself after a reconnect (keepSubscribed).
      ...(role === "subscriber" ? { autoResubscribe: false } : {}),
    },
    (times) => Math.min(times * 200, 2000),
    // A Cluster checks its slot map is served (CLUSTER INFO) before it is "ready".
    { enableReadyCheck: true },
  );
  let lastLog = 0;
  r.on("error", (err: Error) => {
    // Reconnects are normal operations; log at most once every 5 s per connection. A CLI command
    // says what went wrong in its own message: its reconnects are only for LOG_LEVEL=debug.
    if (Date.now() - lastLog > 5000) {
      lastLog = Date.now();
      const fields = { err: err.message, role };
      if (role === "cli") log?.debug(fields, "redis connection error (will retry)");
      else log?.warn(fields, "redis connection error (will retry)");
    }
  });
  return r;
}

/** What a connection holds that Redis has not answered: commands and bytes not yet sent. */
export interface PendingWork {
  /** Commands sent and not answered, plus those queued while (re)connecting. */
  commands: number;
  /** Bytes written to the socket that the kernel has not taken yet (Redis is not reading). */
  unsentBytes: number;
}

/** ioredis keeps these private; their lengths are what a stuck Redis makes grow. */
interface Queued {
  offlineQueue?: { length: number };
  commandQueue?: { length: number };
  stream?: { writableLength?: number };
}

function nodePending(r: Redis): PendingWork {
  const q = r as unknown as Queued;
  return {
    commands: (q.commandQueue?.length ?? 0) + (q.offlineQueue?.length ?? 0),
    unsentBytes: q.stream?.writableLength ?? 0,
  };
}

/**
 * The work `client` has waiting on Redis (for a Cluster: its own offline queue and every node's):
 * a hung or partitioned Redis answers nothing, so this grows with every command sent to it and
 * is what a gateway bounds (gateway.limits.maxPendingRedisCommands). Cheap: a few lengths.
 */
export function pendingWork(client: RedisClient): PendingWork {
  if (!client.isCluster) return nodePending(client as Redis);
  const cluster = client as Cluster;
  const out = { commands: (cluster as unknown as Queued).offlineQueue?.length ?? 0, unsentBytes: 0 };
  for (const node of cluster.nodes("all")) {
    const p = nodePending(node);
    out.commands += p.commands;
    out.unsentBytes += p.unsentBytes;
  }
  return out;
}

/**
 * Connect and PING once, no retries, all within `timeoutMs`: the client when Redis (or a ready
 * Redis Cluster) answers, else why not. The whole exchange is timed, not only the TCP connect: a
 * paused or overloaded Redis, or a dead backend behind a TCP proxy, takes the connection and then
 * never answers, and ioredis would wait for its ready check forever.
 */
export async function probeConnection(
  url: string,
  timeoutMs: number,
): Promise<{ redis: RedisClient; error?: undefined } | { redis?: undefined; error: string }> {
  const r = openRedis(
    url,
    // The command timeout bounds what a caller asks of the client afterwards too (doctor's checks).
    {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      disconnectTimeout: 200, // a server that never answered is not waited for on close either
    },
    () => null,
    { lazyConnect: true, slotsRefreshTimeout: timeoutMs },
  );
  let lastError: string | undefined;
  let connected = false;
  r.on("error", (err: Error) => (lastError = err.message));
  r.on("connect", () => (connected = true));
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<"expired">((resolve) => (timer = setTimeout(() => resolve("expired"), timeoutMs)));
  const answered = (async () => {
    await r.connect();
    return await r.ping();
  })();
  try {
    const outcome = await Promise.race([answered, expired]);
    if (outcome === "PONG") return { redis: r };
    answered.catch(() => {}); // settled by the disconnect below; nobody waits for it any more
    r.disconnect();
    if (outcome === "expired")
      return { error: connected ? `${NO_REPLY} within ${timeoutMs} ms` : `no connection within ${timeoutMs} ms` };
    return { error: `answered PING with ${JSON.stringify(outcome)}: not Redis` };
  } catch (err) {
    r.disconnect();
    return { error: lastError ?? (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Subscribe `client` (a "subscriber" connection) to `channel`, and again after every reconnect,
 * then call `onSubscribed` (where a caller re-checks what it may have missed while away).
 * Resolves on the first subscription.
 *
 * Not ioredis's own re-subscription (`autoResubscribe`, off for subscribers): it leaves its
 * SUBSCRIBE's promise unhandled, so a connection closed before that SUBSCRIBE is answered (a
 * process stopping just after Redis came back) rejects it with "Connection is closed", an
 * unhandled rejection, which ends a Node process. A Redis Cluster re-subscribes through its own
 * subscriber connection, which handles its promises.
 */
export async function keepSubscribed(client: RedisClient, channel: string, onSubscribed?: () => void): Promise<void> {
  const subscribe = () => client.subscribe(channel).then(() => onSubscribed?.());
  // Every "ready" after the first is a reconnect; the first one finds the subscription below
  // made already, and a second SUBSCRIBE of a channel changes nothing.
  client.on("ready", () => {
    if (!client.isCluster) subscribe().catch(() => {});
    else onSubscribed?.();
  });
  await subscribe();
}
