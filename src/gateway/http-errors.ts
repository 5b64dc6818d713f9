/**
 * One error shape for every endpoint: `{ ok:false, error:{ code, message, issues? } }`.
 * Typed Switchboard errors map to HTTP statuses by their stable code.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { PayloadTooLargeError, SwitchboardError, ValidationError } from "../errors/index.js";
import { bodyTooLargeError } from "./message-limit.js";

const STATUS_BY_CODE: Record<string, number> = {
  invalid_request: 400,
  invalid_session_key: 400,
  invalid_agent_id: 400,
  invalid_session_id: 400,
  invalid_config: 400,
  unauthorized: 401,
  forbidden: 403,
  send_blocked: 403,
  session_not_found: 404,
  run_not_found: 404,
  not_found: 404,
  payload_too_large: 413,
  label_conflict: 409,
  session_conflict: 409,
  session_exists: 409,
  lineage_immutable: 409,
  unavailable: 503,
};

export function errorBody(err: SwitchboardError): { ok: false; error: Record<string, unknown> } {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err instanceof ValidationError) error.issues = err.issues;
  if (err instanceof PayloadTooLargeError) Object.assign(error, err.details);
  return { ok: false, error };
}

export function httpErrorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (err instanceof SwitchboardError) {
    void reply.status(STATUS_BY_CODE[err.code] ?? 500).send(errorBody(err));
    return;
  }
  const fe = err as FastifyError;
  if (fe.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    void reply.status(413).send(errorBody(bodyTooLargeError(req)));
    return;
  }
  if (fe.validation || fe.statusCode === 400 || fe.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE" || fe.code === "FST_ERR_CTP_EMPTY_JSON_BODY") {
    void reply.status(400).send({ ok: false, error: { code: "invalid_request", message: err.message, issues: [] } });
    return;
  }
  if (fe.statusCode && fe.statusCode < 500) {
    void reply.status(fe.statusCode).send({ ok: false, error: { code: "invalid_request", message: err.message } });
    return;
  }
  // Redis away on the request path: say so plainly instead of a bare 500.
  const unavailable = /ECONNREFUSED|Connection is closed|MaxRetriesPerRequest|Stream isn't writeable/i.test(err.message);
  req.log.error({ err }, "request failed");
  void reply
    .status(unavailable ? 503 : 500)
    .send({ ok: false, error: { code: unavailable ? "unavailable" : "internal", message: unavailable ? "Redis is unavailable, try again" : err.message } });
}
