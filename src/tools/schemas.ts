/**
 * Session tool arguments: one zod schema per tool is the source of validation, TypeScript types
 * and the JSON Schema offered to LLMs as function tools. Numbers are `number` (not integer) and
 * floored, as OpenClaw does for Gemini compatibility.
 */
import { z } from "zod";
import { safeString } from "../session/safe-text-schema.js";

/** The longest sessions_send waits for a reply, like agent.wait's ceiling of 10 minutes. */
export const MAX_SEND_WAIT_SECONDS = 600;

const count = (min: number) => z.number().min(min).transform((n) => Math.floor(n));

export const SessionsListArgs = z.strictObject({
  kinds: z.array(z.string()).optional().describe("any of main, group, cron, hook, node, other"),
  limit: count(1).optional().describe("max rows (clamped to 200)"),
  activeMinutes: count(1).optional().describe("only sessions updated within N minutes"),
  messageLimit: count(0).optional().describe("include the last N messages per session (max 20); tool results are left out"),
  label: safeString("label", "label").max(512).optional(),
  agentId: safeString("agentId").max(64).optional(),
  search: z.string().max(200).optional().describe("case-insensitive substring of key, label, name or sessionId"),
  includeDerivedTitles: z.boolean().optional().describe("derive a title from the first user message when no name is set"),
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
  message: z.string().min(1).max(100_000),
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

export type ToolName = keyof typeof TOOL_DESCRIPTIONS;

export function toolJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  return rest;
}
