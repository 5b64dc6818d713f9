/**
 * The rules of `sessions_spawn`, as plain functions without I/O: the limits that apply to a
 * requester, the allow list for target agents, the child's role, the texts agents already know.
 * The order in which the tool applies them and their wording are in docs/concepts/subagents.md.
 */
import { findAgent } from "../config/agents.js";
import { AGENT_ID_PATTERN, type Config } from "../config/schema.js";

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;

/** Keys that name a delivery target: a spawn never delivers anywhere itself. */
export const DELIVERY_PARAM_KEYS = [
  "target",
  "transport",
  "channel",
  "to",
  "threadId",
  "thread_id",
  "replyTo",
  "reply_to",
] as const;

export function deliveryParamError(key: string): string {
  return `sessions_spawn does not support "${key}". Use "message" or "sessions_send" for channel delivery.`;
}

export function invalidAgentIdError(agentId: string): string {
  return (
    `Invalid agentId "${agentId}". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. ` +
    `Use agents_list to discover valid targets.`
  );
}

export function isValidAgentId(agentId: string): boolean {
  return AGENT_ID_PATTERN.test(agentId);
}

export function maxSpawnDepthFor(config: Config, agentId: string): number {
  return findAgent(config, agentId)?.subagents?.maxSpawnDepth ?? config.agents.defaults.subagents.maxSpawnDepth;
}

export function requireAgentIdFor(config: Config, agentId: string): boolean {
  return findAgent(config, agentId)?.subagents?.requireAgentId ?? config.agents.defaults.subagents.requireAgentId;
}

/** The requester agent's allow list (its own entry, else the defaults). `"*"` allows any agent. */
export function allowAgentsFor(config: Config, agentId: string): string[] {
  const own = findAgent(config, agentId)?.subagents?.allowAgents ?? config.agents.defaults.subagents.allowAgents;
  return own.map((a) => a.trim().toLowerCase()).filter(Boolean);
}

export type AgentCheck = { ok: true } | { ok: false; error: string };

export function checkTargetAgent(config: Config, requesterAgent: string, targetAgent: string): AgentCheck {
  if (targetAgent === requesterAgent) return { ok: true };
  const allow = allowAgentsFor(config, requesterAgent);
  if (allow.includes("*") || allow.includes(targetAgent)) return { ok: true };
  return {
    ok: false,
    error: `agentId is not allowed for sessions_spawn (allowed: ${allow.length ? allow.join(",") : "none"})`,
  };
}

/** The agents a requester may spawn: itself, plus its allow list (every configured agent for `*`). */
export function spawnableAgents(
  config: Config,
  requesterAgent: string,
): { id: string; name?: string; configured: boolean }[] {
  const allow = allowAgentsFor(config, requesterAgent);
  const ids = new Set<string>([requesterAgent]);
  if (allow.includes("*")) for (const a of config.agents.list) ids.add(a.id);
  else for (const a of allow) if (isValidAgentId(a)) ids.add(a);
  return [...ids].map((id) => {
    const entry = findAgent(config, id);
    return { id, ...(entry?.name ? { name: entry.name } : {}), configured: entry !== undefined };
  });
}

export function depthError(depth: number, max: number): string {
  return `sessions_spawn is not allowed at this depth (current depth: ${depth}, max: ${max})`;
}

export function maxChildrenError(active: number, max: number): string {
  return `sessions_spawn has reached max active children for this session (${active}/${max})`;
}

export const REQUIRE_AGENT_ID_ERROR =
  "sessions_spawn requires explicit agentId when requireAgentId is configured. " +
  "Use agents_list to see allowed agent ids.";
export const SANDBOX_INHERIT_ERROR =
  "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.";
export const SANDBOX_REQUIRE_ERROR =
  'sessions_spawn sandbox="require" needs a sandboxed target runtime. ' +
  'Pick a sandboxed agentId or use sandbox="inherit".';
export const MODE_SESSION_ERROR = 'mode="session" requires thread=true so the subagent can stay bound to a thread.';
export const THREAD_UNAVAILABLE_ERROR =
  "thread=true is unavailable because no channel plugin registered subagent_spawning hooks.";
export const ACP_UNSUPPORTED_ERROR =
  'runtime="acp" is not supported by Switchboard: external harness agents (ACP) cannot be spawned. ' +
  'Use runtime="subagent" (the default).';

export const SPAWN_NOTE =
  "Auto-announce is push-based. After spawning children, do NOT call sessions_list, sessions_history, " +
  "exec sleep, or any polling tool. Wait for completion events to arrive as user messages, " +
  "track expected child session keys, and only send your final answer after ALL expected completions arrive. " +
  "If a child completion event arrives AFTER your final answer, reply ONLY with NO_REPLY.";

export function invalidThinkingError(level: string): string {
  return `Invalid thinking level "${level}". Use one of: ${THINKING_LEVELS.join(", ")}.`;
}

/** A model id is a provider/model name: no whitespace, no control characters. */
const MODEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;
export function invalidModelError(model: string): string | undefined {
  return MODEL_PATTERN.test(model)
    ? undefined
    : `Invalid model "${model}": model ids are letters, digits and . _ : / @ + - (no spaces).`;
}

/** Role of a child at `depth`: it may orchestrate its own children while below the max depth. */
export function roleAt(depth: number, maxDepth: number): "orchestrator" | "leaf" {
  return depth >= maxDepth ? "leaf" : "orchestrator";
}

/** The child's first message: context lines, then the task (blank-line separated). */
export function childTaskMessage(task: string, depth: number, maxDepth: number): string {
  return [
    `[Subagent Context] You are running as a subagent (depth ${depth}/${maxDepth}). ` +
      `Results auto-announce to your requester; do not busy-poll for status.`,
    `[Subagent Task]: ${task}`,
  ].join("\n\n");
}

/** Model for a child: target agent's `subagents.model`, else the defaults' (an explicit param wins). */
export function subagentModelFor(config: Config, agentId: string): string | undefined {
  return findAgent(config, agentId)?.subagents?.model ?? config.agents.defaults.subagents.model;
}

export function subagentThinkingFor(config: Config, agentId: string): string | undefined {
  return findAgent(config, agentId)?.subagents?.thinking ?? config.agents.defaults.subagents.thinking;
}
