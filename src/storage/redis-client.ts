/**
 * A Redis connection as the rest of Switchboard sees it: one server (`Redis`) or a Redis Cluster
 * (`Cluster`). Both have the same command, MULTI/pipeline, Lua (`defineCommand`) and pub/sub API;
 * every key carries the deployment's `{prefix}` hash tag, so under a Cluster each script, MULTI and
 * pipeline stays within one slot (docs/concepts/redis-cluster.md).
 */
import type { Cluster, Redis } from "ioredis";

export type RedisClient = Redis | Cluster;
