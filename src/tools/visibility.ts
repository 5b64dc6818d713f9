/**
 * Who may see or message which session (docs/concepts/tools.md, "Visibility"), as plain functions: the effective
 * visibility level, the agent-to-agent allow patterns, and the guard with OpenClaw's exact
 * error texts (agents and their prompts already know them).
 */
import type { Config } from "../config/schema.js";

export type Visibility = "self" | "tree" | "agent" | "all";
export type GuardAction = "list" | "history" | "send" | "status";

export type GuardResult = { allowed: true } | { allowed: false; status: "forbidden"; error: string };

const ACTION_LABEL: Record<GuardAction, string> = {
  list: "Session list",
  history: "Session history",
  send: "Session send",
  status: "Session status",
};

const A2A_DISABLED: Record<GuardAction, string> = {
  history: "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
  send: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
  status: "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
  list: "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility.",
};

const A2A_DENIED: Record<GuardAction, string> = {
  history: "Agent-to-agent history denied by tools.agentToAgent.allow.",
  send: "Agent-to-agent messaging denied by tools.agentToAgent.allow.",
  status: "Agent-to-agent status denied by tools.agentToAgent.allow.",
  list: "Agent-to-agent listing denied by tools.agentToAgent.allow.",
};

/** Sandboxed callers are clamped to their spawned tree (sandbox.sessionToolsVisibility "spawned"). */
export function effectiveVisibility(config: Config, sandboxed: boolean): Visibility {
  const v = config.tools.sessions.visibility;
  if (sandboxed && config.agents.defaults.sandbox.sessionToolsVisibility === "spawned") return "tree";
  return v;
}

function patternMatches(pattern: string, agentId: string): boolean {
  if (pattern === "*") return true;
  if (!pattern.includes("*")) return pattern === agentId;
  const re = new RegExp(
    `^${pattern
      .split("*")
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
    "i",
  );
  return re.test(agentId);
}

/** Same agent always; else enabled and both ends match an allow pattern (empty list = all). */
export function agentToAgentAllowed(
  config: Config,
  requesterAgent: string,
  targetAgent: string,
): "same" | "allowed" | "disabled" | "denied" {
  if (requesterAgent === targetAgent) return "same";
  const a2a = config.tools.agentToAgent;
  if (!a2a.enabled) return "disabled";
  const ok = (id: string) => a2a.allow.length === 0 || a2a.allow.some((p) => patternMatches(p, id));
  return ok(requesterAgent) && ok(targetAgent) ? "allowed" : "denied";
}

export interface GuardInput {
  action: GuardAction;
  visibility: Visibility;
  requesterKey: string;
  requesterAgent: string;
  targetKey: string;
  targetAgent: string;
  /** Target was spawned by the requester or by one of its descendants: needed for `tree`. */
  isDescendant: boolean;
}

export function checkVisibility(config: Config, g: GuardInput): GuardResult {
  const label = ACTION_LABEL[g.action];
  if (g.targetAgent !== g.requesterAgent) {
    // A requester's own spawned descendants stay reachable under tree/all even across agents
    // (#55983); `agent` means the caller's agent only, `self` the caller only.
    if (g.isDescendant && (g.visibility === "tree" || g.visibility === "all")) return { allowed: true };
    if (g.visibility !== "all") {
      return {
        allowed: false,
        status: "forbidden",
        error: `${label} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.`,
      };
    }
    const a2a = agentToAgentAllowed(config, g.requesterAgent, g.targetAgent);
    if (a2a === "disabled") return { allowed: false, status: "forbidden", error: A2A_DISABLED[g.action] };
    if (a2a === "denied") return { allowed: false, status: "forbidden", error: A2A_DENIED[g.action] };
    return { allowed: true };
  }
  if (g.targetKey === g.requesterKey) return { allowed: true };
  if (g.visibility === "self") {
    return {
      allowed: false,
      status: "forbidden",
      error: `${label} visibility is restricted to the current session (tools.sessions.visibility=self).`,
    };
  }
  if (g.visibility === "tree" && !g.isDescendant) {
    return {
      allowed: false,
      status: "forbidden",
      error: `${label} visibility is restricted to the current session tree (tools.sessions.visibility=tree).`,
    };
  }
  return { allowed: true };
}
