/**
 * Shapes of the gateway's answers, for the OpenAPI document only (the handlers build them; the
 * integration tests check them). Kept loose where an answer carries stored records whose
 * fields grow over time.
 */
import { z } from "zod";

const anyObject = z.record(z.string(), z.unknown());

export const ErrorBody = z
  .object({
    ok: z.literal(false),
    error: z.object({
      code: z.string().describe("stable machine-readable code, e.g. invalid_request, unauthorized, payload_too_large"),
      message: z.string(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
      limitBytes: z.number().int().optional().describe("413: the message limit (gateway.limits.messageBytes)"),
      bodyLimitBytes: z.number().int().optional().describe("413 for a whole body: the body limit"),
      sizeBytes: z.number().int().optional(),
      field: z.string().optional(),
    }),
  })
  .describe(
    "Every Switchboard error: 400 invalid input, 401 no/wrong token, 403, 404, 409, 413 over the size limit, " +
      "503 Redis away",
  );

export const InboundResult = z.object({
  ok: z.literal(true),
  agentId: z.string(),
  sessionKey: z.string(),
  sessionId: z.string().optional(),
  runId: z.string().optional(),
  isNewSession: z.boolean().optional(),
  resetReason: z.string().optional(),
  blocked: z.literal("send_policy_deny").optional(),
  command: z.enum(["send", "status", "stop", "tools"]).optional(),
  duplicate: z.boolean().optional(),
});

export const RpcAnswer = z
  .union([z.object({ ok: z.literal(true), result: z.unknown() }), ErrorBody])
  .describe("200 with ok:true and the method's result, or ok:false with a domain error (invalid params answer 400)");

export const ToolResult = anyObject.describe("the tool's result object; status:error or forbidden still answers 200");

export const RunRecord = z.object({
  runId: z.string(),
  sessionKey: z.string(),
  status: z.enum(["queued", "running", "ok", "error", "timeout", "killed"]),
  reply: z.string().optional(),
  error: z.string().optional(),
  startedAt: z.number().optional(),
  endedAt: z.number().optional(),
  usage: z.object({ input: z.number(), output: z.number() }).optional(),
});

export const Deliveries = z.object({ deliveries: z.array(anyObject), truncated: z.literal(true).optional() });

export const Readiness = z.object({
  ok: z.boolean(),
  redis: z
    .enum(["up", "down", "backlogged", "full"])
    .optional()
    .describe(
      "full: at or over maxmemory, writes are refused; backlogged: Redis does not answer this gateway's commands",
    ),
  storage: z
    .enum(["ok", "unhealthy"])
    .optional()
    .describe("unhealthy: workers see transcript storage refusing writes; reported without making the gateway unready"),
  code: z
    .string()
    .optional()
    .describe("storage unhealthy: the error's code (ENOSPC, EACCES…); its message is for status and doctor"),
  error: z.string().optional().describe("why the gateway is not ready"),
  warning: z.string().optional().describe("storage unhealthy: what that means for turns"),
  since: z.string().optional().describe("storage unhealthy: since when (ISO 8601)"),
});

export const OpenAiError = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string() }),
});

const Usage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() });

export const ChatCompletion = z.object({
  id: z.string().describe("chatcmpl-<runId>"),
  object: z.literal("chat.completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.number().int(),
      message: z.object({ role: z.literal("assistant"), content: z.string() }),
      finish_reason: z.literal("stop"),
    }),
  ),
  usage: Usage,
});

export const ModelList = z.object({
  object: z.literal("list"),
  data: z.array(
    z.object({ id: z.string(), object: z.literal("model"), created: z.number().int(), owned_by: z.string() }),
  ),
});

export const Model = ModelList.shape.data.element;
