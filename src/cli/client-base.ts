/**
 * What every CLI client is, over HTTP (client.ts) or directly against Redis (direct-client.ts),
 * and the errors both raise.
 */
import type { CoreServices } from "../app/core-services.js";
import type { Services } from "../app/services.js";
import { displayRedisUrl } from "../config/redis-url.js";
import { SwitchboardError } from "../errors/index.js";

export interface Client {
  mode: "http" | "direct";
  describe: string;
  rpc(method: string, params?: unknown): Promise<unknown>;
  get(path: string): Promise<unknown>;
  close(): Promise<void>;
  /** Direct mode only: the services without BullMQ (sessions, transcripts, run records). */
  core?: CoreServices;
  /** Direct mode with every method only (status and doctor read queues with them). */
  svc?: Services;
  /**
   * Direct mode only: why `err`, thrown by a Redis command, means Redis does not answer (the
   * connection's own error, e.g. ECONNREFUSED, or a command timeout), or undefined when it does not.
   */
  redisDownCause?(err: unknown): string | undefined;
}

export class RpcCallError extends SwitchboardError {}

/** What to do when Redis does not answer: said wherever the CLI finds out. */
export function redisUnavailable(url: string, cause: string): RpcCallError {
  return new RpcCallError(
    "redis_unavailable",
    `Redis does not answer at ${displayRedisUrl(url)} (${cause}). ` +
      "Start Redis (`redis-server`, or `docker compose up -d redis`), " +
      "or point Switchboard at yours with REDIS_URL or redis.url in the config file (--config); " +
      "`switchboard doctor` checks the setup.",
  );
}
