/**
 * OpenClaw's HTTP tool door, `POST /tools/invoke`, so scripts written for OpenClaw keep working:
 *
 *   { tool, args?, sessionKey?, action?, dryRun? }
 *   200 { ok: true, result: { content: [{ type: "text", text }], details } }   (the tool's result,
 *       including tool-level `status: "error" | "forbidden"` answers, as OpenClaw returns them)
 *   400 { ok: false, error: { type, message } }   invalid request or a tool that failed
 *   404 { ok: false, error: { type: "not_found", message } }   no such tool
 *   405 for any other method
 *
 * Every error of this door has that one shape, `type` being Switchboard's stable code: also those
 * the gateway answers before the handler (401, a body over the body limit 413, bad JSON 400, Redis
 * away 503), reshaped on their way out. A 413 carries the limits as well (`limitBytes`, …).
 *
 * A tool outside the calling session's tool policy (tools.profile, …) is a 404, as in OpenClaw.
 * `sessionKey` is the calling session (default: the main session); `action` is copied into
 * `args` when the tool takes one and `args` lacks it; `dryRun` is accepted and ignored, as in
 * OpenClaw. Same auth as every other endpoint. Switchboard's own door is `POST /v1/tools/<name>`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { SwitchboardError } from "../errors/index.js";
import { clientGoneSignal } from "./client-gone.js";
import { gatewayErrorOf } from "./error-payload.js";
import type { ToolCallOptions } from "../tools/tool-runtime.js";
import { zodIssues } from "../config/parse.js";
import type { GatewayDeps } from "./gateway-deps.js";
import { effectiveTools } from "../subagents/tool-policy.js";
import { sessionCaller } from "../tools/session-caller.js";
import { TOOL_NAMES } from "../tools/tool-runtime.js";

type ToolEndpoint = (name: string, body: unknown, opts?: ToolCallOptions) => Promise<unknown>;

const InvokeBody = z.strictObject({
  tool: z.string().min(1).max(128),
  args: z.record(z.string(), z.unknown()).default({}),
  sessionKey: z.string().min(1).max(512).optional(),
  action: z.string().min(1).max(64).optional(),
  dryRun: z.boolean().optional(),
});

/** Tools whose arguments include `action` (OpenClaw maps the top-level field into them). */
const TAKES_ACTION = new Set(["subagents"]);

function fail(type: string, message: string, details?: Record<string, unknown>) {
  return { ok: false as const, error: { type, message, ...(details ?? {}) } };
}

/**
 * onSend hook of this door's routes: an error in the gateway's shape (`{ ok:false, error:{ code,
 * message, … } }`: the auth hook's 401, the body limit's 413, bad JSON, Redis away) leaves in this
 * door's, `{ ok:false, error:{ type, message, … } }`. Issues are already in the message, or none.
 */
export async function reshapeInvokeError(
  _req: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
): Promise<unknown> {
  const error = gatewayErrorOf(reply, payload);
  // Already in this door's shape (`type`): its own answers.
  if (!error || error.type !== undefined) return payload;
  const { code, message, ...details } = error;
  return JSON.stringify(fail(String(code ?? "error"), String(message ?? "error"), details));
}

export function registerToolsInvoke(app: FastifyInstance, svc: GatewayDeps, tools: ToolEndpoint | undefined): void {
  app.post("/tools/invoke", { onSend: reshapeInvokeError }, async (req, reply) => {
    const parsed = InvokeBody.safeParse(req.body ?? {});
    if (!parsed.success) {
      return reply.status(400).send(
        fail(
          "invalid_request",
          zodIssues(parsed.error)
            .map((i) => `${i.path}: ${i.message}`)
            .join("; "),
        ),
      );
    }
    const { tool, sessionKey, action } = parsed.data;
    if (!tools || !(TOOL_NAMES as readonly string[]).includes(tool)) {
      return reply.status(404).send(fail("not_found", `Tool not available: ${tool}`));
    }
    const args =
      action !== undefined && TAKES_ACTION.has(tool) && parsed.data.args.action === undefined
        ? { ...parsed.data.args, action }
        : parsed.data.args;
    try {
      // As in OpenClaw, a tool the calling session's tool policy leaves out is "not available".
      // Inside the try: a caller key that is refused (an unsafe character) answers in this door's shape.
      const caller = await sessionCaller(svc, sessionKey ?? "main");
      if (!(effectiveTools(svc.config, caller) as readonly string[]).includes(tool)) {
        return reply.status(404).send(fail("not_found", `Tool not available: ${tool}`));
      }
      // A client that goes away ends a wait in the tool (sessions_send's) at once; what the call
      // started goes on.
      const gone = clientGoneSignal(reply.raw);
      const details = await tools(tool, { sessionKey: sessionKey ?? "main", args }, { signal: gone.signal }).finally(
        gone.dispose,
      );
      return { ok: true, result: { content: [{ type: "text", text: JSON.stringify(details, null, 2) }], details } };
    } catch (err) {
      // Tool errors answer 400 as in OpenClaw; a message over the size limit answers 413, as at
      // every door, with its limits.
      if (err instanceof SwitchboardError && err.code === "payload_too_large")
        return reply.status(413).send(fail(err.code, err.message, err.details));
      if (err instanceof SwitchboardError && err.code !== "internal")
        return reply.status(400).send(fail(err.code, err.message));
      throw err;
    }
  });
  // OpenClaw answers other methods on this path with 405.
  app.route({
    method: ["GET", "PUT", "PATCH", "DELETE"],
    url: "/tools/invoke",
    onSend: reshapeInvokeError,
    handler: async (_req, reply) =>
      reply.status(405).header("allow", "POST").send(fail("method_not_allowed", "use POST")),
  });
}
