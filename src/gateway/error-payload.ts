/**
 * For the doors whose errors have their own shape (OpenClaw's `/tools/invoke`, the OpenAI door):
 * their onSend hooks find, in an answer on its way out, an error in the gateway's shape, the one
 * every endpoint answers with (`{ ok:false, error:{ code, message, issues?, … } }`, src/gateway/
 * http-errors.ts), including those answered before the door's handler ran (the auth hook's 401,
 * the body limit's 413, bad JSON, Redis away), and write it again in the door's shape.
 */
import type { FastifyReply } from "fastify";

/**
 * The gateway-shaped error an error answer's payload holds, without its `issues` (the doors'
 * shapes carry none: they are already in the message, or there are none); undefined for any
 * other payload (a success, a body that is not JSON, an error in another shape).
 */
export function gatewayErrorOf(reply: FastifyReply, payload: unknown): Record<string, unknown> | undefined {
  if (reply.statusCode < 400 || typeof payload !== "string") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const body = parsed as { ok?: unknown; error?: Record<string, unknown> };
  if (body.ok !== false || !body.error) return undefined;
  const { issues: _issues, ...error } = body.error;
  return error;
}
