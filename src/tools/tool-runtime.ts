/**
 * The session tools wired into a process: the invoker handed to agent runtimes for each run
 * (tools called *as* the running session, carrying its hop count and trace), the HTTP endpoint
 * `POST /v1/tools/<name>`, and the announce-queue processor of the agent-to-agent flow.
 */
import type { Processor } from "bullmq";
import { z } from "zod";
import type { ToolDeps } from "./tool-deps.js";
import { zodIssues } from "../config/parse.js";
import { ValidationError } from "../errors/index.js";
import type { QueueName } from "../queues/queue-names.js";
import type { ToolInvoker, ToolInvokerFactory } from "../runtimes/types.js";
import { safeString } from "../session/safe-text-schema.js";
import { createA2AProcessor } from "./a2a-flow.js";
import {
  AgentsListArgs,
  SessionsHistoryArgs,
  SessionsListArgs,
  SessionsSendArgs,
  SessionsSpawnArgs,
  SessionStatusArgs,
  SessionsYieldArgs,
  SubagentsArgs,
  SUBAGENT_TOOL_DESCRIPTIONS,
  TOOL_DESCRIPTIONS,
  toolJsonSchema,
  type ToolName,
} from "./schemas.js";
import { agentsList } from "./agents-list.js";
import { sessionsSpawn } from "./sessions-spawn.js";
import { sessionsYield } from "./sessions-yield.js";
import { subagentsTool } from "./subagents-tool.js";
import { createSubagentProcessors, SUBAGENT_ANNOUNCE, SUBAGENT_ARCHIVE } from "../subagents/announce.js";
import { effectiveTools, toolForbiddenError } from "../subagents/tool-policy.js";
import type { Job } from "bullmq";
import { sessionStatus } from "./session-status.js";
import { sessionsHistory } from "./sessions-history.js";
import { sessionsList } from "./sessions-list.js";
import { sessionsSend } from "./sessions-send.js";
import { sessionCaller } from "./session-caller.js";
import { assertMessageSize, toolMessageTexts } from "../text/message-size.js";
import { toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

export interface ToolRuntime {
  invokerFor: ToolInvokerFactory;
  /** `opts.signal`: the HTTP client went away; a wait in the tool ends then (see ToolCallOptions). */
  endpoint: (name: string, body: unknown, opts?: ToolCallOptions) => Promise<unknown>;
  processors: Partial<Record<QueueName, Processor>>;
  call(name: string, caller: ToolCaller, args: unknown, opts?: ToolCallOptions): Promise<ToolResult>;
}

export interface ToolCallOptions {
  /**
   * The caller stopped waiting (an MCP client cancelled its call, an HTTP client went away): a
   * wait in the tool (sessions_send's) ends at once as a timeout; what the call started goes on.
   */
  signal?: AbortSignal;
}

/** Each tool's argument schema (validation, and the JSON Schema offered to LLMs and MCP clients). */
export const TOOL_SCHEMAS: Record<ToolName, z.ZodType> = {
  sessions_list: SessionsListArgs,
  sessions_history: SessionsHistoryArgs,
  sessions_send: SessionsSendArgs,
  session_status: SessionStatusArgs,
  sessions_spawn: SessionsSpawnArgs,
  agents_list: AgentsListArgs,
  sessions_yield: SessionsYieldArgs,
  subagents: SubagentsArgs,
};

export const TOOL_DESCRIPTION_TEXT: Record<ToolName, string> = { ...TOOL_DESCRIPTIONS, ...SUBAGENT_TOOL_DESCRIPTIONS };

export const TOOL_NAMES = Object.keys(TOOL_SCHEMAS) as ToolName[];

const ToolRequestSchema = z.strictObject({
  sessionKey: safeString("sessionKey").min(1).max(512),
  sandboxed: z.boolean().optional(),
  args: z.record(z.string(), z.unknown()).default({}),
});

export function createToolRuntime(svc: ToolDeps): ToolRuntime {
  const call = async (name: string, caller: ToolCaller, args: unknown, opts?: ToolCallOptions): Promise<ToolResult> => {
    // Tool profiles: a tool outside the session's list answers `forbidden` (docs/concepts/subagents.md).
    if ((TOOL_NAMES as string[]).includes(name) && !(effectiveTools(svc.config, caller) as string[]).includes(name)) {
      return { status: "forbidden", error: toolForbiddenError(name) };
    }
    switch (name) {
      case "sessions_list":
        return await sessionsList(svc, caller, args);
      case "sessions_history":
        return await sessionsHistory(svc, caller, args);
      case "sessions_send":
        return await sessionsSend(svc, svc.waiter(), caller, args, opts?.signal);
      case "session_status":
        return await sessionStatus(svc, caller, args);
      case "sessions_spawn":
        return await sessionsSpawn(svc, caller, args);
      case "agents_list":
        return await agentsList(svc, caller, args);
      case "sessions_yield":
        return await sessionsYield(svc, caller, args);
      case "subagents":
        return await subagentsTool(svc, caller, args);
      default:
        return toolError(`Unknown tool: ${name}`);
    }
  };

  const definitions = TOOL_NAMES.map((name) => ({
    name,
    description: TOOL_DESCRIPTION_TEXT[name],
    parameters: toolJsonSchema(TOOL_SCHEMAS[name]),
  }));
  const subagentJobs = createSubagentProcessors(svc);
  const a2a = createA2AProcessor(svc);
  // The announce queue carries both flows; each job names its own.
  const announceProcessor = async (job: Job, token?: string) => {
    if (job.name === SUBAGENT_ANNOUNCE) return await subagentJobs.announce(job, token);
    if (job.name === SUBAGENT_ARCHIVE) return await subagentJobs.archive(job);
    return await a2a(job, token);
  };

  // Calls from outside a turn (the HTTP tool doors, MCP) meet the message size limit here, one
  // check for every door; a turn's own calls carry what its runtime produced.
  const limited: typeof call = async (name, caller, args, opts) => {
    assertMessageSize(svc.config.gateway.limits.messageBytes, toolMessageTexts(args, "args."));
    return await call(name, caller, args, opts);
  };

  return {
    call: limited,
    invokerFor: (ctx) => {
      let seq = 0;
      let yielded: string | undefined;
      const caller: ToolCaller = {
        sessionKey: ctx.sessionKey,
        agentId: ctx.agentId,
        sandboxed: ctx.sandboxed,
        hop: ctx.hop ?? 0,
        ...(ctx.traceId ? { traceId: ctx.traceId } : {}),
        runId: ctx.runId,
        nextCallSeq: () => seq++,
        ...(ctx.spawnDepth ? { spawnDepth: ctx.spawnDepth } : {}),
        ...(ctx.subagentRole ? { subagentRole: ctx.subagentRole } : {}),
        onYield: (message) => (yielded = message),
      };
      // Worked out when a runtime first asks for the definitions: a turn whose runtime offers
      // no tools (echo, most script rules) never needs the list.
      let allowed: Set<string> | undefined;
      const invoker: ToolInvoker = {
        definitions: () => {
          allowed ??= new Set<string>(effectiveTools(svc.config, caller));
          return definitions.filter((d) => allowed?.has(d.name));
        },
        // After sessions_yield the turn is over: runtimes stop calling tools (they check
        // `yielded`); one that does not is refused anything else in this turn.
        call: async (name, args) =>
          yielded !== undefined
            ? { status: "error", error: `turn yielded: ${yielded}` }
            : await call(name, caller, args),
        yielded: () => (yielded !== undefined ? { message: yielded } : undefined),
      };
      return invoker;
    },
    endpoint: async (name, body, opts) => {
      const parsed = ToolRequestSchema.safeParse(body ?? {});
      if (!parsed.success) throw ValidationError.fromIssues("invalid tool request", zodIssues(parsed.error));
      if (!(TOOL_NAMES as string[]).includes(name))
        throw new ValidationError(`unknown tool ${name} (known: ${TOOL_NAMES.join(", ")})`);
      return await limited(
        name,
        await sessionCaller(svc, parsed.data.sessionKey, parsed.data.sandboxed),
        parsed.data.args,
        opts,
      );
    },
    processors: { announce: announceProcessor as Processor },
  };
}
