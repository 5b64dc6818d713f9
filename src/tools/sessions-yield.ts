/**
 * sessions_yield: the caller ends its turn on purpose; its next turn is the completion event
 * of its sub-agents, queued in its inbox by the durable announce (no polling). The yield is
 * recorded on the calling run; the runtime stops right after this call and the turn ends with
 * no reply (docs/concepts/subagents.md, sessions_yield).
 */
import type { ToolDeps } from "./tool-deps.js";
import { SessionsYieldArgs } from "./schemas.js";
import { argsError, toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

export const DEFAULT_YIELD_MESSAGE = "Turn yielded.";

export async function sessionsYield(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionsYieldArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  if (!caller.sessionKey) return toolError("No session context");
  // Only a running turn can end: the HTTP endpoint has none to yield.
  if (!caller.onYield) return toolError("Yield not supported in this context");
  const message = parsed.data.message ?? DEFAULT_YIELD_MESSAGE;
  if (caller.runId) {
    const key = svc.keys.run(caller.runId);
    if (await svc.redis.exists(key)) await svc.redis.hset(key, "yielded", message);
  }
  caller.onYield(message);
  return { status: "yielded", message };
}
