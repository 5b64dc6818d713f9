/**
 * ioredis clients by role (BULLMQ_NOTES §2.9): workers and subscribers retry forever
 * (`maxRetriesPerRequest: null`, required by BullMQ's blocking calls); producers on the HTTP
 * path give up after one retry so a request fails fast instead of hanging while Redis is away.
 */
import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "pino";

export type ConnectionRole = "worker" | "producer" | "subscriber";

export function createRedis(url: string, role: ConnectionRole, log?: Logger): Redis {
  const opts: RedisOptions = {
    maxRetriesPerRequest: role === "producer" ? 1 : null,
    enableReadyCheck: true,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    connectionName: `switchboard-${role}`,
  };
  const r = new Redis(url, opts);
  let lastLog = 0;
  r.on("error", (err) => {
    // Reconnects are normal operations; log at most once every 5 s per connection.
    if (Date.now() - lastLog > 5000) {
      lastLog = Date.now();
      log?.warn({ err: err.message, role }, "redis connection error (will retry)");
    }
  });
  return r;
}
