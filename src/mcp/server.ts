/**
 * The session tools as an MCP server acting as one session. Every call goes through the tool
 * runtime's `call`, the same path as `POST /v1/tools/<name>`, with the caller rebuilt from the
 * session's stored entry each time, so visibility, send policy and tool profiles are those of
 * the session. Only the tools the session's profile allows are listed (docs/concepts/mcp.md).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type {
  CallToolResult,
  ServerNotification,
  ServerRequest,
  ToolAnnotations,
} from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import type { ToolDeps } from "../tools/tool-deps.js";
import { SwitchboardError, redisFailure } from "../errors/index.js";
import { effectiveTools } from "../subagents/tool-policy.js";
import type { ToolName } from "../tools/schemas.js";
import { sessionCaller } from "../tools/session-caller.js";
import type { ToolResult } from "../tools/tool-context.js";
import { DEFAULT_SEND_TIMEOUT_SECONDS } from "../tools/sessions-send.js";
import { TOOL_DESCRIPTION_TEXT, TOOL_NAMES, TOOL_SCHEMAS, type ToolRuntime } from "../tools/tool-runtime.js";

export const MCP_SERVER_NAME = "switchboard";

/** Tools that only read: MCP clients may call them without asking the user first. */
const READ_ONLY: ReadonlySet<ToolName> = new Set<ToolName>(["sessions_list", "sessions_history", "agents_list"]);

/** Tool results whose status means the call did not do what was asked. */
const FAILED_STATUSES = new Set(["error", "forbidden"]);

/**
 * Tools never listed over MCP: `sessions_yield` ends the calling turn, and an MCP client is never
 * inside one, so it could only ever be refused.
 */
const NOT_OVER_MCP: ReadonlySet<ToolName> = new Set<ToolName>(["sessions_yield"]);

/**
 * The longest `sessions_send` wait for a client that sent no progress token. MCP clients give a
 * request 60 s by default and only a progress notification restarts that clock (for clients that
 * ask for it), so a longer wait would end in the client's own timeout error, without the runId,
 * while the message was sent: capped, the call answers `timeout` with the runId instead.
 */
export const MCP_PLAIN_WAIT_SECONDS = 50;
/** How often a waiting `sessions_send` reports progress to a client that sent a progress token. */
const PROGRESS_EVERY_MS = 15_000;

/**
 * What a tool call uses of the SDK's request context. `signal` is aborted when the client cancels
 * the call (`notifications/cancelled`, also sent by the SDK client on its own request timeout) or
 * the connection closes.
 */
export type CallExtra = Pick<RequestHandlerExtra<ServerRequest, ServerNotification>, "_meta" | "sendNotification"> & {
  signal?: AbortSignal;
};

/** `sessions_send` arguments as this client can wait for them (see MCP_PLAIN_WAIT_SECONDS). */
export function waitableArgs(name: ToolName, args: unknown, extra: CallExtra): unknown {
  if (name !== "sessions_send" || extra._meta?.progressToken !== undefined) return args;
  const a = (args ?? {}) as { timeoutSeconds?: unknown };
  const asked = typeof a.timeoutSeconds === "number" ? a.timeoutSeconds : DEFAULT_SEND_TIMEOUT_SECONDS;
  return asked > MCP_PLAIN_WAIT_SECONDS ? { ...a, timeoutSeconds: MCP_PLAIN_WAIT_SECONDS } : args;
}

/** While `work` runs, a progress notification every `everyMs` when the client asked for them. */
export async function withProgress<T>(extra: CallExtra, work: Promise<T>, everyMs = PROGRESS_EVERY_MS): Promise<T> {
  const token = extra._meta?.progressToken;
  if (token === undefined) return await work;
  let beats = 0;
  const timer = setInterval(() => {
    beats++;
    void extra
      .sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: beats, message: "waiting for the reply" },
      })
      .catch(() => undefined);
  }, everyMs);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

/**
 * A thrown error as a tool result: Redis away is `unavailable` (try again), Redis at its maxmemory
 * `redis_full` (never its raw reply, which names script hashes), as at every door.
 */
export function errorResult(err: unknown): ToolResult {
  const failure = redisFailure(err);
  if (failure) return { status: "error", code: failure.code, error: failure.message };
  const code = err instanceof SwitchboardError ? err.code : "internal";
  return { status: "error", code, error: (err as Error)?.message ?? String(err) };
}

export interface SessionMcpDeps {
  svc: ToolDeps;
  tools: ToolRuntime;
  /** The session the client acts as (any accepted spelling; canonicalised on each call). */
  sessionKey: string;
  version: string;
  log: Logger;
}

/**
 * A tool result as MCP content: the JSON text every client can show a model, the same object as
 * structured content for clients that read it, and `isError` when the tool refused or failed.
 */
export function toCallToolResult(result: ToolResult): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(result) }],
    structuredContent: result,
    ...(FAILED_STATUSES.has(String(result.status)) ? { isError: true } : {}),
  };
}

/** The tools this session may call now (profile, allow/deny, sub-agent lineage). */
export async function listedTools(deps: Pick<SessionMcpDeps, "svc" | "sessionKey">): Promise<ToolName[]> {
  const caller = await sessionCaller(deps.svc, deps.sessionKey);
  const allowed = new Set<string>(effectiveTools(deps.svc.config, caller));
  return TOOL_NAMES.filter((name) => allowed.has(name) && !NOT_OVER_MCP.has(name));
}

/** One MCP server (one per client connection) exposing the session's tools. */
export async function createSessionMcpServer(deps: SessionMcpDeps): Promise<McpServer> {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: deps.version },
    {
      instructions: `Switchboard session tools, acting as session ${deps.sessionKey}.`,
      // Declared up front, so a session allowed no tools at all (a leaf sub-agent) lists none
      // instead of answering tools/list with "method not found" (the SDK adds the handlers with
      // the first tool otherwise).
      capabilities: { tools: { listChanged: false } },
    },
  );
  for (const name of await listedTools(deps)) {
    const annotations: ToolAnnotations = READ_ONLY.has(name) ? { readOnlyHint: true } : {};
    server.registerTool(
      name,
      { description: TOOL_DESCRIPTION_TEXT[name], inputSchema: TOOL_SCHEMAS[name], annotations },
      // The SDK has validated `args` with the same schema; the runtime parses them again, as
      // for every door (parsing is idempotent).
      async (args: unknown, extra: CallExtra) => {
        try {
          const caller = await sessionCaller(deps.svc, deps.sessionKey);
          // A cancel ends the call's wait at once (its place on the run-done subscription and its
          // timer are released); what the call started goes on: the run is not stopped.
          const signal = extra.signal;
          const call = deps.tools.call(name, caller, waitableArgs(name, args, extra) ?? {}, signal ? { signal } : {});
          const result = await withProgress(extra, call);
          // The SDK sends nothing for a cancelled request: the result (a sessions_send's runId)
          // would be lost without a trace, so it is logged.
          if (signal?.aborted)
            deps.log.info(
              { tool: name, runId: result.runId, status: result.status },
              "mcp tool call cancelled by the client: its wait ended, the run goes on",
            );
          return toCallToolResult(result);
        } catch (err) {
          deps.log.warn({ err, tool: name }, "mcp tool call failed");
          return toCallToolResult(errorResult(err));
        }
      },
    );
  }
  return server;
}
