/**
 * The session tools as an MCP server acting as one session. Every call goes through the tool
 * runtime's `call`, the same path as `POST /v1/tools/<name>`, with the caller rebuilt from the
 * session's stored entry each time, so visibility, send policy and tool profiles are those of
 * the session. Only the tools the session's profile allows are listed (docs/concepts/mcp.md).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import type { ToolDeps } from "../tools/tool-deps.js";
import { SwitchboardError } from "../errors/index.js";
import { effectiveTools } from "../subagents/tool-policy.js";
import type { ToolName } from "../tools/schemas.js";
import { sessionCaller } from "../tools/session-caller.js";
import type { ToolResult } from "../tools/tool-context.js";
import { TOOL_DESCRIPTION_TEXT, TOOL_NAMES, TOOL_SCHEMAS, type ToolRuntime } from "../tools/tool-runtime.js";

export const MCP_SERVER_NAME = "switchboard";

/** Tools that only read: MCP clients may call them without asking the user first. */
const READ_ONLY: ReadonlySet<ToolName> = new Set<ToolName>(["sessions_list", "sessions_history", "agents_list"]);

/** Tool results whose status means the call did not do what was asked. */
const FAILED_STATUSES = new Set(["error", "forbidden"]);

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
  return TOOL_NAMES.filter((name) => allowed.has(name));
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
      capabilities: { tools: { listChanged: true } },
    },
  );
  for (const name of await listedTools(deps)) {
    const annotations: ToolAnnotations = READ_ONLY.has(name) ? { readOnlyHint: true } : {};
    server.registerTool(
      name,
      { description: TOOL_DESCRIPTION_TEXT[name], inputSchema: TOOL_SCHEMAS[name], annotations },
      // The SDK has validated `args` with the same schema; the runtime parses them again, as
      // for every door (parsing is idempotent).
      async (args: unknown) => {
        try {
          return toCallToolResult(
            await deps.tools.call(name, await sessionCaller(deps.svc, deps.sessionKey), args ?? {}),
          );
        } catch (err) {
          deps.log.warn({ err, tool: name }, "mcp tool call failed");
          const code = err instanceof SwitchboardError ? err.code : "internal";
          return toCallToolResult({ status: "error", code, error: (err as Error)?.message ?? String(err) });
        }
      },
    );
  }
  return server;
}
