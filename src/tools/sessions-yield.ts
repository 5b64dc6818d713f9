/**
 * sessions_yield: the caller ends its turn on purpose; its next turn is the completion event
 * of its sub-agents, queued in its inbox by the durable announce (no polling). The yield itself
 * is recorded on the calling run, and runtimes stop calling tools after it.
 */
import type { Services } from "../app/services.js";
import { SessionsYieldArgs } from "./schemas.js";
import { argsError, toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

export const DEFAULT_YIELD_MESSAGE = "Turn yielded.";

export async function sessionsYield(svc: Services, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionsYieldArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  if (!caller.sessionKey) return toolError("No session context");
  const message = parsed.data.message ?? DEFAULT_YIELD_MESSAGE;
  if (caller.runId) {
    const key = svc.keys.run(caller.runId);
    if (await svc.redis.exists(key)) await svc.redis.hset(key, "yielded", message);
  }
  caller.onYield?.(message);
  return { status: "yielded", message };
}
