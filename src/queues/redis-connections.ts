/**
 * ioredis clients by role: workers and subscribers retry forever
 * (`maxRetriesPerRequest: null`, required by BullMQ's blocking calls); producers on the HTTP
 * path give up after one retry so a request fails fast instead of hanging while Redis is away.
 *
 * `redis.url` names one Redis or a Redis Cluster (redis+cluster://…): the same roles and options
 * apply to either, for a Cluster on each node connection (docs/concepts/redis-cluster.md).
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { parseRedisUrl } from "../config/redis-url.js";
import type { RedisClient } from "../storage/redis-client.js";

export type ConnectionRole = "worker" | "producer" | "subscriber";

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
      maxRetriesPerRequest: role === "producer" ? 1 : null,
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
    // Reconnects are normal operations; log at most once every 5 s per connection.
    if (Date.now() - lastLog > 5000) {
      lastLog = Date.now();
      log?.warn({ err: err.message, role }, "redis connection error (will retry)");
    }
  });
  return r;
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
