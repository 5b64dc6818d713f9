/**
 * The session tools wired into a process: the invoker handed to agent runtimes for each run
 * (tools called *as* the running session, carrying its hop count and trace), the HTTP endpoint
 * `POST /v1/tools/<name>`, and the announce-queue processor of the agent-to-agent flow.
 */
import type { Processor } from "bullmq";
import { z } from "zod";
import type { Services } from "../app/services.js";
import { isAgentSandboxed } from "../config/agents.js";
import { zodIssues } from "../config/parse.js";
import { ValidationError } from "../errors/index.js";
import type { QueueName } from "../queues/queue-names.js";
import type { ToolInvoker } from "../runtimes/types.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { shouldResolveSessionIdInput } from "../session/session-id.js";
import type { SessionEntry } from "../storage/session-entry.js";
import { agentIdFromSessionKey } from "../session/key-parse.js";
import { defaultAgentId } from "../config/agents.js";
import type { ToolInvokerFactory } from "../workers/turn-executor.js";
import { createA2AProcessor } from "./a2a-flow.js";
import { SessionsHistoryArgs, SessionsListArgs, SessionsSendArgs, SessionStatusArgs, TOOL_DESCRIPTIONS, toolJsonSchema, type ToolName } from "./schemas.js";
import { sessionStatus } from "./session-status.js";
import { sessionsHistory } from "./sessions-history.js";
import { sessionsList } from "./sessions-list.js";
import { sessionsSend } from "./sessions-send.js";
import { toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

export interface ToolRuntime {
  invokerFor: ToolInvokerFactory;
  endpoint: (name: string, body: unknown) => Promise<unknown>;
  processors: Partial<Record<QueueName, Processor>>;
  call(name: string, caller: ToolCaller, args: unknown): Promise<ToolResult>;
}

const SCHEMAS: Record<ToolName, z.ZodType> = {
  sessions_list: SessionsListArgs,
  sessions_history: SessionsHistoryArgs,
  sessions_send: SessionsSendArgs,
  session_status: SessionStatusArgs,
};

export const TOOL_NAMES = Object.keys(SCHEMAS) as ToolName[];

const ToolRequestSchema = z.strictObject({
  sessionKey: z.string().min(1).max(512),
  sandboxed: z.boolean().optional(),
  args: z.record(z.string(), z.unknown()).default({}),
});

/**
 * The calling session: a key (canonicalised), or — as everywhere a key is accepted — the
 * sessionId of a stored session. A stored key always wins over an equal-looking sessionId.
 */
export async function resolveCaller(svc: Services, raw: string): Promise<{ sessionKey: string; entry: SessionEntry | null }> {
  const sessionKey = canonicalSessionKey(svc.config, raw);
  const entry = await svc.sessions.get(sessionKey);
  if (entry || !shouldResolveSessionIdInput(raw.trim())) return { sessionKey, entry };
  const byId = await svc.sessions.keyForSessionId(raw.trim());
  return byId ? { sessionKey: byId, entry: await svc.sessions.get(byId) } : { sessionKey, entry };
}

export function createToolRuntime(svc: Services): ToolRuntime {

  const call = async (name: string, caller: ToolCaller, args: unknown): Promise<ToolResult> => {
    switch (name) {
      case "sessions_list":
        return await sessionsList(svc, caller, args);
      case "sessions_history":
        return await sessionsHistory(svc, caller, args);
      case "sessions_send":
        return await sessionsSend(svc, svc.waiter(), caller, args);
      case "session_status":
        return await sessionStatus(svc, caller, args);
      default:
        return toolError(`Unknown tool: ${name}`);
    }
  };

  const definitions = TOOL_NAMES.map((name) => ({ name, description: TOOL_DESCRIPTIONS[name], parameters: toolJsonSchema(SCHEMAS[name]) }));

  return {
    call,
    invokerFor: (ctx) => {
      let seq = 0;
      const caller: ToolCaller = {
        sessionKey: ctx.sessionKey,
        agentId: ctx.agentId,
        sandboxed: ctx.sandboxed,
        hop: ctx.hop ?? 0,
        ...(ctx.traceId ? { traceId: ctx.traceId } : {}),
        runId: ctx.runId,
        nextCallSeq: () => seq++,
      };
      const invoker: ToolInvoker = { definitions: () => definitions, call: (name, args) => call(name, caller, args) };
      return invoker;
    },
    endpoint: async (name, body) => {
      const parsed = ToolRequestSchema.safeParse(body ?? {});
      if (!parsed.success) throw new ValidationError("invalid tool request", zodIssues(parsed.error));
      if (!(TOOL_NAMES as string[]).includes(name)) throw new ValidationError(`unknown tool ${name} (known: ${TOOL_NAMES.join(", ")})`);
      const { sessionKey, entry } = await resolveCaller(svc, parsed.data.sessionKey);
      const agentId = agentIdFromSessionKey(sessionKey, defaultAgentId(svc.config));
      const sandboxed = parsed.data.sandboxed ?? entry?.sandboxed ?? isAgentSandboxed(svc.config, agentId);
      return await call(name, { sessionKey, agentId, sandboxed, hop: 0 }, parsed.data.args);
    },
    processors: { announce: createA2AProcessor(svc) as Processor },
  };
}
