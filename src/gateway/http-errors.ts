/**
 * One error shape for every endpoint: `{ ok:false, error:{ code, message, issues? } }`.
 * Typed Switchboard errors map to HTTP statuses by their stable code (src/errors/codes.ts).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import {
  PayloadTooLargeError,
  SwitchboardError,
  ValidationError,
  httpStatusOf,
  redisFailure,
} from "../errors/index.js";
import { bodyTooLargeError } from "./message-limit.js";

export function errorBody(err: SwitchboardError): { ok: false; error: Record<string, unknown> } {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err instanceof ValidationError) error.issues = err.issues;
  if (err instanceof PayloadTooLargeError) Object.assign(error, err.details);
  return { ok: false, error };
}

export function httpErrorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (err instanceof SwitchboardError) {
    if (err.details?.retryAfterSeconds) void reply.header("retry-after", String(err.details.retryAfterSeconds));
    void reply.status(httpStatusOf(err.code)).send(errorBody(err));
    return;
  }
  const fe = err as FastifyError;
  if (fe.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    void reply.status(413).send(errorBody(bodyTooLargeError(req)));
    return;
  }
  if (
    fe.validation ||
    fe.statusCode === 400 ||
    fe.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE" ||
    fe.code === "FST_ERR_CTP_EMPTY_JSON_BODY"
  ) {
    void reply.status(400).send({ ok: false, error: { code: "invalid_request", message: err.message, issues: [] } });
    return;
  }
  if (fe.statusCode && fe.statusCode < 500) {
    void reply.status(fe.statusCode).send({ ok: false, error: { code: "invalid_request", message: err.message } });
    return;
  }
  // Redis full or away on the request path: the typed answer every door gives (what to do, never
  // Redis's reply). A warning without the stack: under a flood every request ends here.
  const failure = redisFailure(err);
  if (failure) {
    req.log.warn({ err: err.message, code: failure.code }, "request failed: Redis");
    httpErrorHandler(failure, req, reply);
    return;
  }
  req.log.error({ err }, "request failed");
  void reply.status(500).send({ ok: false, error: { code: "internal", message: err.message } });
}
