/**
 * A raw Redis failure as the typed error every door answers with: Redis at its maxmemory
 * (`redis_full`, with how long to wait) or Redis away (`unavailable`). Never Redis's own text,
 * which names scripts and lines. One mapping for the HTTP doors, the OpenAI stream, MCP and the
 * CLI's direct mode.
 */
import { isRedisDown } from "./redis-down.js";
import { isRedisFull, REDIS_FULL_MESSAGE, REDIS_FULL_RETRY_AFTER_S } from "./redis-full.js";
import { SwitchboardError } from "./switchboard-error.js";

export const REDIS_UNAVAILABLE_MESSAGE = "Redis is unavailable; try again";
/** Seconds a client refused for Redis away is asked to wait (`Retry-After`): a reconnect is quick. */
export const REDIS_UNAVAILABLE_RETRY_AFTER_S = 1;

/** The typed error `err` stands for when it is Redis full or away; undefined for anything else. */
export function redisFailure(err: unknown): SwitchboardError | undefined {
  if (isRedisFull(err))
    return new SwitchboardError("redis_full", REDIS_FULL_MESSAGE, { retryAfterSeconds: REDIS_FULL_RETRY_AFTER_S });
  if (isRedisDown(err))
    return new SwitchboardError("unavailable", REDIS_UNAVAILABLE_MESSAGE, {
      retryAfterSeconds: REDIS_UNAVAILABLE_RETRY_AFTER_S,
    });
  return undefined;
}
