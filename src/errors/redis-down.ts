/**
 * The one test for "Redis does not answer": what ioredis throws while the server is away
 * (refused or unresolvable connection, a closed or unwritable stream, a producer connection out
 * of retries) or took a command and did not answer it within the connection's `commandTimeout`
 * (a hung or partitioned server: "Command timed out"). The gateway answers these with 503
 * `unavailable`, the CLI with what to start.
 */
import { SwitchboardError } from "./switchboard-error.js";

const REDIS_DOWN =
  /ECONNREFUSED|ENOTFOUND|ETIMEDOUT|Connection is closed|Stream isn't writeable|max ?retries ?per ?request/i;
/** ioredis's error for a command not answered within the connection's `commandTimeout`. */
const COMMAND_TIMED_OUT = "Command timed out";

export function isRedisDown(err: unknown): boolean {
  if (err instanceof SwitchboardError || !(err instanceof Error)) return false;
  return err.name === "MaxRetriesPerRequestError" || err.message === COMMAND_TIMED_OUT || REDIS_DOWN.test(err.message);
}
