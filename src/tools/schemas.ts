/**
 * Session tool arguments: one zod schema per tool is the source of validation, TypeScript types
 * and the JSON Schema offered to LLMs as function tools. Numbers are `number` (not integer) and
 * floored, as OpenClaw does for Gemini compatibility.
 */
import { z } from "zod";
import { safeString } from "../session/safe-text-schema.js";

/** The longest sessions_send waits for a reply, like agent.wait's ceiling of 10 minutes. */
export const MAX_SEND_WAIT_SECONDS = 600;

/** The longest run timeout there is (2 days), as for the agent RPC's runTimeoutSeconds. */
export const MAX_RUN_TIMEOUT_SECONDS = 172_800;
const clampRunTimeout = (n: number): number => Math.min(n, MAX_RUN_TIMEOUT_SECONDS);
import { MAX_MESSAGE_BYTES } from "../text/message-size.js";

const count = (min: number) =>
  z
    .number()
    .min(min)
    .transform((n) => Math.floor(n));

export const SessionsListArgs = z.strictObject({
  kinds: z.array(z.string()).optional().describe("any of main, group, cron, hook, node, other"),
  limit: count(1).optional().describe("max rows (clamped to 200)"),
  activeMinutes: count(1).optional().describe("only sessions updated within N minutes"),
  messageLimit: count(0)
    .optional()
    .describe("include the last N messages per session (max 20); tool results are left out"),
  label: safeString("label", "label").max(512).optional(),
  agentId: safeString("agentId").max(64).optional(),
  search: z.string().max(200).optional().describe("case-insensitive substring of key, label, name or sessionId"),
  includeDerivedTitles: z
    .boolean()
    .optional()
    .describe("derive a title from the first user message when no name is set"),
  includeLastMessage: z.boolean().optional().describe("add a preview of the last message"),
});

export const SessionsHistoryArgs = z.strictObject({
  sessionKey: safeString("sessionKey").min(1).max(512).describe("session key, 'main', 'current' or a sessionId"),
  limit: count(1).optional(),
  includeTools: z.boolean().optional(),
});

export const SessionsSendArgs = z.strictObject({
  sessionKey: safeString("sessionKey").min(1).max(512).optional(),
  label: safeString("label", "label").min(1).max(512).optional(),
  agentId: safeString("agentId").min(1).max(64).optional(),
  message: z.string().min(1).max(MAX_MESSAGE_BYTES),
  // Clamped, not refused: a model asking for a day gets the longest wait there is (the run goes
  // on after a timeout anyway), and no timer is ever armed with a value it cannot hold.
  timeoutSeconds: count(0)
    .transform((n) => Math.min(n, MAX_SEND_WAIT_SECONDS))
    .optional()
    .describe(`0 = fire-and-forget; default 30, at most ${MAX_SEND_WAIT_SECONDS}`),
});

export const SessionStatusArgs = z.strictObject({
  sessionKey: safeString("sessionKey").min(1).max(512).optional(),
  model: z.string().min(1).max(200).optional().describe('set a model override; "default" clears it'),
});

export const TOOL_DESCRIPTIONS = {
  sessions_list: "List sessions you can see, newest first, optionally with their last messages.",
  sessions_history: "Read the (sanitised) transcript of a session.",
  sessions_send: "Send a message to another session; optionally wait for its reply.",
  session_status: "Show the status card of a session; optionally set its model override.",
} as const;

export type ToolName = keyof typeof TOOL_DESCRIPTIONS | keyof typeof SUBAGENT_TOOL_DESCRIPTIONS;

export function toolJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  return rest;
}

// ---- Sub-agent tools (docs/concepts/subagents.md) ----

export const SessionsSpawnArgs = z.strictObject({
  task: z.string().min(1).max(MAX_MESSAGE_BYTES).describe("what the sub-agent should do"),
  label: safeString("label", "label")
    .min(1)
    .max(512)
    .optional()
    .describe("short name for this run (subagents targets and the announce use it)"),
  agentId: safeString("agentId")
    .min(1)
    .max(64)
    .optional()
    .describe("target agent (see agents_list); default: your own"),
  model: z.string().min(1).max(200).optional(),
  thinking: z.string().min(1).max(32).optional(),
  // Clamped to the agent RPC's ceiling: a larger value cannot arm an abort timer and the child
  // turn would be given up at once (AbortSignal.timeout refuses more than 2^32-1 ms).
  runTimeoutSeconds: count(0)
    .transform(clampRunTimeout)
    .optional()
    .describe(`abort the child run after N seconds (0 = no limit, at most ${MAX_RUN_TIMEOUT_SECONDS})`),
  timeoutSeconds: count(0).transform(clampRunTimeout).optional().describe("alias of runTimeoutSeconds"),
  cleanup: z
    .enum(["delete", "keep"])
    .optional()
    .describe("after the announce: delete the child session or keep it (default keep)"),
  context: z.enum(["isolated", "fork"]).optional().describe("fork: the child starts from a copy of your transcript"),
  sandbox: z.enum(["inherit", "require"]).optional(),
  thread: z.boolean().optional(),
  mode: z.enum(["run", "session"]).optional(),
  runtime: z.enum(["subagent", "acp"]).optional(),
});

export const AgentsListArgs = z.strictObject({});

export const SessionsYieldArgs = z.strictObject({
  message: z.string().max(4000).optional().describe('note kept for your next turn (default "Turn yielded.")'),
});

export const SubagentsArgs = z.strictObject({
  action: z.enum(["list", "kill", "steer"]).optional().describe("default list"),
  target: z
    .string()
    .min(1)
    .max(512)
    .optional()
    .describe("index, label, session key, runId prefix, 'last', or 'all' (kill)"),
  message: z.string().min(1).optional().describe("steer guidance (max 4000 chars)"),
  recentMinutes: z
    .number()
    .min(1)
    .transform((n) => Math.min(1440, Math.floor(n)))
    .optional(),
});

export const SUBAGENT_TOOL_DESCRIPTIONS = {
  sessions_spawn:
    "Spawn a sub-agent session for a background task; returns at once, the result is announced to you when it ends.",
  agents_list: "List the agent ids you may pass to sessions_spawn.",
  sessions_yield: "End your turn now; your next turn is the completion event of your sub-agents (no polling).",
  subagents: "List, steer or kill the sub-agents this session spawned.",
} as const;
