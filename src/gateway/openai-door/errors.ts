/**
 * Errors in OpenAI's shape — `{ error: { message, type, param, code } }` — so OpenAI SDKs raise
 * their usual typed errors (AuthenticationError, PermissionDeniedError, …). `code` is
 * Switchboard's stable error code; 413 answers also carry the limits.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import {
  PayloadTooLargeError,
  SwitchboardError,
  ValidationError,
  httpStatusOf,
  type ErrorCode,
} from "../../errors/index.js";
import { gatewayErrorOf } from "../error-payload.js";
import { errorBody, httpErrorHandler } from "../http-errors.js";
import { bodyTooLargeError } from "../message-limit.js";

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string } & Record<string, unknown>;
}

const TYPE_BY_STATUS: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "invalid_request_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  504: "timeout_error",
};

/** The OpenAI-shaped body for a status and Switchboard's `{ code, message, … }` error. */
export function openAiError(
  status: number,
  error: { code?: unknown; message?: unknown } & Record<string, unknown>,
  param: string | null = null,
): OpenAiErrorBody {
  const { code, message, ...extra } = error;
  return {
    error: {
      message: String(message ?? "error"),
      type: TYPE_BY_STATUS[status] ?? (status >= 500 ? "server_error" : "invalid_request_error"),
      param,
      code: String(code ?? "error"),
      ...extra,
    },
  };
}

/** A Switchboard error raised by the door itself, naming the request field at fault (`param`). */
export class DoorError extends SwitchboardError {
  /** The status its code maps to (src/errors/codes.ts). */
  readonly status: number;

  constructor(
    code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    details?: Record<string, unknown>,
  ) {
    super(code, message, details);
    this.status = httpStatusOf(code);
  }
}

/** The door's error handler: the gateway's mapping of statuses, in OpenAI's shape. */
export function openAiErrorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (err instanceof DoorError) {
    void reply
      .status(err.status)
      .send(openAiError(err.status, { code: err.code, message: err.message, ...(err.details ?? {}) }, err.param));
    return;
  }
  if ((err as FastifyError).code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    void reply.status(413).send(openAiError(413, errorBody(bodyTooLargeError(req)).error, "messages"));
    return;
  }
  if (err instanceof PayloadTooLargeError || err instanceof ValidationError) {
    const status = httpStatusOf(err.code);
    const { issues: _issues, ...rest } = errorBody(err).error;
    const first = err instanceof ValidationError ? err.issues[0] : undefined;
    // `(root)` names no request field (a check on a value the door built, such as a key).
    const path = first?.path && first.path !== "(root)" ? first.path : undefined;
    if (first && first.message !== err.message) {
      // An issue that names its field itself ("user contains U+0000 …") is not prefixed again.
      const named = path && !first.message.startsWith(`${path} `) ? `${path}: ` : "";
      rest.message = `${err.message}: ${named}${first.message}`;
    }
    void reply.status(status).send(openAiError(status, rest, path ?? (status === 413 ? "messages" : null)));
    return;
  }
  // Everything else: the gateway's handler decides the status; onSend reshapes its body.
  httpErrorHandler(err, req, reply);
}

/**
 * onSend hook of the door's routes: a Switchboard-shaped error answer (`{ ok:false, error }`),
 * such as the gateway's 401 from the auth hook, is rewritten in OpenAI's shape.
 */
export async function reshapeErrorPayload(
  _req: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
): Promise<unknown> {
  const error = gatewayErrorOf(reply, payload);
  return error ? JSON.stringify(openAiError(reply.statusCode, error)) : payload;
}
