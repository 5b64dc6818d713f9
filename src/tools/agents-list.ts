/** agents_list: the agent ids this session may pass to sessions_spawn (docs/concepts/subagents.md). */
import type { ToolDeps } from "./tool-deps.js";
import { allowAgentsFor, spawnableAgents } from "../subagents/spawn-policy.js";
import { AgentsListArgs } from "./schemas.js";
import { argsError, type ToolCaller, type ToolResult } from "./tool-context.js";

export async function agentsList(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = AgentsListArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  return {
    status: "ok",
    requester: caller.agentId,
    allowAny: allowAgentsFor(svc.config, caller.agentId).includes("*"),
    agents: spawnableAgents(svc.config, caller.agentId),
  };
}
