/**
 * Every stable error code Switchboard answers with, and the HTTP status each one maps to.
 * One table: the gateway's error handler, the OpenAI door and the docs all read it, and a code
 * cannot be added without choosing its status (the type is the table's keys).
 * Codes are part of the API (HTTP bodies, MCP tool results, CLI output, tests match on them).
 */
export const HTTP_STATUS_BY_CODE = {
  // Bad input.
  invalid_request: 400,
  invalid_session_key: 400,
  invalid_agent_id: 400,
  invalid_session_id: 400,
  invalid_config: 400,
  unauthorized: 401,
  forbidden: 403,
  send_blocked: 403,
  not_found: 404,
  session_not_found: 404,
  run_not_found: 404,
  model_not_found: 404,
  label_conflict: 409,
  session_conflict: 409,
  session_exists: 409,
  lineage_immutable: 409,
  payload_too_large: 413,
  // Try again later: the session's inbox is full (gateway.limits.maxQueuedTurns or maxQueuedBytes).
  queue_full: 429,
  // Try again: Redis (or a claim held by another request) is not answering yet.
  unavailable: 503,
  // Try again later: Redis refuses writes at its maxmemory (src/errors/redis-full.ts).
  redis_full: 503,
  // Internal states a client cannot fix; they reach HTTP only through a bug.
  session_busy: 500,
  invalid_entry: 500,
  stale_fence: 500,
  transcript_locked: 500,
  turn_handed_back: 500,
  deployment_mismatch: 500,
  internal: 500,
  // Raised by the CLI's own client, never answered by the gateway.
  redis_unavailable: 503,
  gateway_unreachable: 502,
  http_error: 502,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof HTTP_STATUS_BY_CODE;

export const ERROR_CODES = Object.keys(HTTP_STATUS_BY_CODE) as ErrorCode[];

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(HTTP_STATUS_BY_CODE, code);
}

/** The HTTP status of a code; anything unknown is a 500. */
export function httpStatusOf(code: string): number {
  return isErrorCode(code) ? HTTP_STATUS_BY_CODE[code] : 500;
}
