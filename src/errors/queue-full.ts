import { SwitchboardError } from "./switchboard-error.js";

/** How long a client refused with `queue_full` is told to wait (HTTP `Retry-After`, seconds). */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 5;

/**
 * A turn from a door (inbound, the `agent` RPC, the OpenAI door, a `sessions_send` or
 * `sessions_spawn`) into a session whose inbox already holds `gateway.limits.maxQueuedTurns`
 * turns, or whose queued turns it would take past `gateway.limits.maxQueuedBytes` bytes (`bytes`
 * set): nothing is queued. Answered with HTTP 429 and `Retry-After`; the turns already queued run
 * as usual, and once they drain below the limit new ones are accepted again; the message and
 * `limitName` say which limit (docs/concepts/limits.md).
 */
export class QueueFullError extends SwitchboardError {
  readonly sessionKey: string;
  /** The limit reached: turns, or bytes when `bytes` is set. */
  readonly limit: number;
  /** Turns queued. */
  readonly queued: number;
  /** With the byte limit: the bytes queued, and this turn's. */
  readonly bytes: { queued: number; turn: number } | undefined;

  constructor(opts: { sessionKey: string; limit: number; queued: number; bytes?: { queued: number; turn: number } }) {
    const { sessionKey, limit, queued, bytes } = opts;
    super(
      "queue_full",
      bytes
        ? `session ${sessionKey} already has ${bytes.queued} bytes queued in ${queued} turns, and this turn of ` +
            `${bytes.turn} bytes would take it past gateway.limits.maxQueuedBytes (${limit}): nothing was queued; ` +
            "try again later"
        : `session ${sessionKey} already has ${queued} turns queued ` +
            `(gateway.limits.maxQueuedTurns is ${limit}): nothing was queued; try again later`,
      {
        sessionKey,
        limitName: bytes ? "maxQueuedBytes" : "maxQueuedTurns",
        limit,
        queued,
        ...(bytes ? { queuedBytes: bytes.queued, turnBytes: bytes.turn } : {}),
        retryAfterSeconds: QUEUE_FULL_RETRY_AFTER_SECONDS,
      },
    );
    this.sessionKey = sessionKey;
    this.limit = limit;
    this.queued = queued;
    this.bytes = bytes;
  }

  /**
   * The same refusal as a session tool's error result (sessions_send, sessions_spawn), naming
   * the session as the calling agent knows it (`sessionKey`: its display key).
   */
  toolResult(sessionKey: string): { status: "error"; error: string; code: "queue_full" } & Record<string, unknown> {
    const named = new QueueFullError({
      sessionKey,
      limit: this.limit,
      queued: this.queued,
      ...(this.bytes ? { bytes: this.bytes } : {}),
    });
    return { status: "error", error: named.message, code: "queue_full", ...named.details };
  }
}
