import { SwitchboardError } from "./switchboard-error.js";

/** How long a client refused with `queue_full` is told to wait (HTTP `Retry-After`, seconds). */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 5;

/**
 * A turn from a door (inbound, the `agent` RPC, the OpenAI door, a `sessions_send` or
 * `sessions_spawn`) into a session whose inbox already holds `gateway.limits.maxQueuedTurns`
 * turns: nothing is queued. Answered with HTTP 429 and `Retry-After`; the turns already queued
 * run as usual, and once they drain below the limit new ones are accepted again
 * (docs/concepts/limits.md).
 */
export class QueueFullError extends SwitchboardError {
  readonly sessionKey: string;
  readonly limit: number;
  readonly queued: number;

  constructor(opts: { sessionKey: string; limit: number; queued: number }) {
    super(
      "queue_full",
      `session ${opts.sessionKey} already has ${opts.queued} turns queued ` +
        `(gateway.limits.maxQueuedTurns is ${opts.limit}): nothing was queued; try again later`,
      {
        sessionKey: opts.sessionKey,
        limit: opts.limit,
        queued: opts.queued,
        retryAfterSeconds: QUEUE_FULL_RETRY_AFTER_SECONDS,
      },
    );
    this.sessionKey = opts.sessionKey;
    this.limit = opts.limit;
    this.queued = opts.queued;
  }

  /**
   * The same refusal as a session tool's error result (sessions_send, sessions_spawn), naming
   * the session as the calling agent knows it (`sessionKey`: its display key).
   */
  toolResult(sessionKey: string): { status: "error"; error: string; code: "queue_full" } & Record<string, unknown> {
    const named = new QueueFullError({ sessionKey, limit: this.limit, queued: this.queued });
    return { status: "error", error: named.message, code: "queue_full", ...named.details };
  }
}
