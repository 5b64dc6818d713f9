/**
 * The gateway's OpenAPI 3.1 document, generated from the zod schemas that validate each
 * request (zod's JSON Schema output is JSON Schema 2020-12, OpenAPI 3.1's dialect). Pure: the
 * same inputs give the same document.
 */
import { z } from "zod";
import { RPC_CATALOG } from "../../rpc/catalog.js";
import { InboundMessageSchema } from "../../session/inbound-message.js";
import { TOOL_DESCRIPTION_TEXT as TOOL_DESCRIPTIONS, TOOL_SCHEMAS, TOOL_NAMES } from "../../tools/tool-runtime.js";
import { ChatCompletionRequest } from "../openai-door/request.js";
import * as R from "./response-schemas.js";

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  /** The RPC methods the gateway serves (every one gets a path). */
  rpcMethods: string[];
  /** gateway.limits.messageBytes, stated in the descriptions. */
  messageBytes: number;
}

/** RPC methods and tools whose body carries a message under the size limit. */
const RPC_WITH_MESSAGE = new Set(["agent", "send"]);
const TOOLS_WITH_MESSAGE = new Set(["sessions_send", "sessions_spawn", "subagents"]);

export function jsonSchemaOf(schema: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Json;
  return rest;
}

class Components {
  readonly schemas: Record<string, Json> = {};
  ref(name: string, schema: z.ZodType): Json {
    this.schemas[name] ??= jsonSchemaOf(schema);
    return { $ref: `#/components/schemas/${name}` };
  }
}

const json = (schema: Json, description: string): Json => ({
  description,
  content: { "application/json": { schema } },
});

export function buildOpenApiDocument(opts: OpenApiOptions): Json {
  const c = new Components();
  const err = c.ref("Error", R.ErrorBody);
  const tooLarge = json(
    err,
    `413 payload_too_large: a message over ${opts.messageBytes} bytes of UTF-8 text, or a body over the body limit`,
  );
  const common = {
    "400": json(err, "invalid input (issues name the fields)"),
    "401": json(err, "missing or wrong token"),
  };
  const paths: Record<string, Json> = {};

  const open = { security: [] };
  paths["/healthz"] = {
    get: {
      tags: ["health"],
      summary: "Liveness",
      ...open,
      responses: { "200": json({ type: "object" }, "the process is up") },
    },
  };
  paths["/readyz"] = {
    get: {
      tags: ["health"],
      summary: "Readiness: Redis reachable and not full (transcript storage health reported, not required)",
      ...open,
      responses: {
        "200": json(c.ref("Readiness", R.Readiness), "ready"),
        "503": json(c.ref("Readiness", R.Readiness), "not ready, and why"),
      },
    },
  };
  paths["/metrics"] = {
    get: {
      tags: ["health"],
      summary: "Prometheus metrics",
      responses: {
        "200": { description: "text exposition format", content: { "text/plain": { schema: { type: "string" } } } },
        "401": common["401"],
      },
    },
  };

  paths["/v1/inbound"] = {
    post: {
      tags: ["inbound"],
      summary: "A channel message arrives: routed to its session and queued as a turn",
      description:
        `\`text\` may have up to ${opts.messageBytes} bytes of UTF-8. Reset triggers and /send, /status, ` +
        `/stop, /tools are handled here; a denied sendPolicy answers blocked:"send_policy_deny".`,
      requestBody: {
        required: true,
        content: { "application/json": { schema: c.ref("InboundMessage", InboundMessageSchema) } },
      },
      responses: { "202": json(c.ref("InboundResult", R.InboundResult), "accepted"), ...common, "413": tooLarge },
    },
  };

  const rpcAnswer = c.ref("RpcAnswer", R.RpcAnswer);
  for (const method of [...opts.rpcMethods].sort()) {
    const doc = RPC_CATALOG[method];
    paths[`/v1/rpc/${method}`] = {
      post: {
        tags: ["rpc"],
        operationId: `rpc_${method.replace(/\W/g, "_")}`,
        summary: doc?.summary ?? method,
        requestBody: {
          required: true,
          content: {
            "application/json": { schema: doc ? c.ref(`rpc.${method}.params`, doc.params) : { type: "object" } },
          },
        },
        responses: {
          "200": json(rpcAnswer, "ok:true with the result, or ok:false with a domain error"),
          ...common,
          ...(RPC_WITH_MESSAGE.has(method) ? { "413": tooLarge } : {}),
        },
      },
    };
  }

  for (const name of TOOL_NAMES) {
    const body = z.strictObject({
      sessionKey: z.string().min(1).max(512).describe("the calling session (its visibility and tool policy apply)"),
      sandboxed: z.boolean().optional(),
      args: TOOL_SCHEMAS[name],
    });
    paths[`/v1/tools/${name}`] = {
      post: {
        tags: ["tools"],
        operationId: `tool_${name}`,
        summary: TOOL_DESCRIPTIONS[name],
        requestBody: {
          required: true,
          content: { "application/json": { schema: c.ref(`tool.${name}.request`, body) } },
        },
        responses: {
          "200": json(c.ref("ToolResult", R.ToolResult), "the tool's result (also for status error/forbidden)"),
          ...common,
          ...(TOOLS_WITH_MESSAGE.has(name) ? { "413": tooLarge } : {}),
        },
      },
    };
  }

  paths["/v1/runs/{runId}"] = {
    get: {
      tags: ["runs"],
      summary: "A run's record: status, reply, error, usage",
      parameters: [{ name: "runId", in: "path", required: true, schema: { type: "string" } }],
      responses: {
        "200": json(c.ref("RunRecord", R.RunRecord), "the run"),
        "401": common["401"],
        "404": json(err, "run_not_found"),
      },
    },
  };
  paths["/v1/deliveries"] = {
    get: {
      tags: ["runs"],
      summary: "Outbound deliveries (replies, announces, sends), newest first",
      parameters: [
        { name: "sessionKey", in: "query", schema: { type: "string" } },
        { name: "channel", in: "query", schema: { type: "string" } },
        { name: "limit", in: "query", schema: { type: "integer", minimum: 1 } },
      ],
      responses: { "200": json(c.ref("Deliveries", R.Deliveries), "deliveries"), ...common },
    },
  };

  const oaErr = c.ref("OpenAiError", R.OpenAiError);
  paths["/v1/chat/completions"] = {
    post: {
      tags: ["openai"],
      operationId: "createChatCompletion",
      summary: "OpenAI-compatible chat completion: one turn of an agent session",
      description: [
        '`model` names the agent: `"<agentId>"`, `"switchboard/<agentId>"`, ' +
          'or `"openclaw/default"` (the default agent).',
        "The session: the `x-switchboard-session-key` (or `x-openclaw-session-key`) header, " +
          "else `user` → `agent:<agentId>:openai-user:<user>`, else a new session per request.",
        `Only the last user message is sent (up to ${opts.messageBytes} bytes); ` +
          `system messages become the turn's extra system prompt; the session's own transcript is the history.`,
        "`stream: true` answers `text/event-stream`: `data: {chat.completion.chunk}` events, then `data: [DONE]`.",
      ].join("\n\n"),
      parameters: [
        {
          name: "x-switchboard-session-key",
          in: "header",
          schema: { type: "string" },
          description: "talk to this session (overrides user)",
        },
        {
          name: "x-switchboard-agent-id",
          in: "header",
          schema: { type: "string" },
          description: "pick the agent (overrides model)",
        },
      ],
      requestBody: {
        required: true,
        content: { "application/json": { schema: c.ref("ChatCompletionRequest", ChatCompletionRequest) } },
      },
      responses: {
        "200": {
          description: "the assistant's reply (JSON), or a stream of chunks (SSE)",
          content: {
            "application/json": { schema: c.ref("ChatCompletion", R.ChatCompletion) },
            "text/event-stream": { schema: { type: "string" } },
          },
        },
        "400": json(oaErr, "invalid request"),
        "401": json(oaErr, "missing or wrong token"),
        "403": json(oaErr, "send_blocked: the session's sendPolicy denies"),
        "404": json(oaErr, "model_not_found"),
        "413": json(oaErr, "payload_too_large"),
        "504": json(oaErr, "the turn did not finish within gateway.openai.waitTimeoutSeconds (it goes on)"),
      },
    },
  };
  paths["/v1/models"] = {
    get: {
      tags: ["openai"],
      operationId: "listModels",
      summary: "The agents, as OpenAI models",
      responses: {
        "200": json(c.ref("ModelList", R.ModelList), "models"),
        "401": json(oaErr, "missing or wrong token"),
      },
    },
  };
  paths["/v1/models/{model}"] = {
    get: {
      tags: ["openai"],
      operationId: "retrieveModel",
      summary: "One agent, as an OpenAI model",
      parameters: [{ name: "model", in: "path", required: true, schema: { type: "string" } }],
      responses: {
        "200": json(c.ref("Model", R.Model), "the model"),
        "401": json(oaErr, "missing or wrong token"),
        "404": json(oaErr, "model_not_found"),
      },
    },
  };
  paths["/admin/queues"] = {
    get: {
      tags: ["admin"],
      summary: "Bull Board (browsers: Basic auth, any user name, the token as password)",
      responses: { "200": { description: "HTML" }, "401": common["401"] },
    },
  };

  return {
    openapi: "3.1.0",
    info: {
      title: "Switchboard gateway",
      version: "v1",
      description:
        "Session gateway for AI agents. " +
        "Every endpoint but /healthz and /readyz needs `Authorization: Bearer <token>` " +
        "when gateway.auth.token is set (Basic auth with the token as password is accepted too). " +
        `One message size limit for every door: ${opts.messageBytes} bytes of UTF-8 text ` +
        `(gateway.limits.messageBytes), 413 payload_too_large above it.`,
    },
    tags: [
      { name: "inbound", description: "messages arriving from channels" },
      { name: "rpc", description: "gateway methods: `POST /v1/rpc/<method>` with the params as body" },
      { name: "tools", description: "session tools, called on behalf of a session" },
      { name: "runs", description: "runs and outbound deliveries" },
      { name: "openai", description: "the OpenAI-compatible door" },
      { name: "health", description: "probes and metrics" },
      { name: "admin", description: "operators' pages" },
    ],
    security: [{ bearerAuth: [] }, { basicAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "gateway.auth.token" },
        basicAuth: {
          type: "http",
          scheme: "basic",
          description: "any user name, gateway.auth.token as password (for browsers)",
        },
      },
      schemas: c.schemas,
    },
  };
}
