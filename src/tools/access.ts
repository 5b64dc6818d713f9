/** The visibility guard with its one I/O need (is the target a descendant of the caller?). */
import type { ToolDeps } from "./tool-deps.js";
import { defaultAgentId } from "../config/agents.js";
import { agentIdFromSessionKey } from "../session/key-parse.js";
import type { ToolCaller } from "./tool-context.js";
import {
  checkVisibility,
  effectiveVisibility,
  type GuardAction,
  type GuardResult,
  type Visibility,
} from "./visibility.js";

export function visibilityOf(svc: ToolDeps, caller: ToolCaller): Visibility {
  return effectiveVisibility(svc.config, caller.sandboxed);
}

/** A sandboxed caller limited to what it spawned (docs/concepts/tools.md, "Visibility"). */
export function restrictedToSpawned(svc: ToolDeps, caller: ToolCaller): boolean {
  return (
    caller.sandboxed &&
    svc.config.agents.defaults.sandbox.sessionToolsVisibility === "spawned" &&
    !caller.sessionKey.includes(":subagent:")
  );
}

export async function guard(
  svc: ToolDeps,
  caller: ToolCaller,
  action: GuardAction,
  targetKey: string,
): Promise<GuardResult> {
  const visibility = visibilityOf(svc, caller);
  const input = {
    action,
    visibility,
    requesterKey: caller.sessionKey,
    requesterAgent: caller.agentId,
    targetKey,
    targetAgent: agentIdFromSessionKey(targetKey, defaultAgentId(svc.config)),
    isDescendant: false,
  };
  // Being a descendant only ever allows more, so the lineage (a read per generation) is walked
  // only when the answer without it is no.
  const withoutLineage = checkVisibility(svc.config, input);
  if (withoutLineage.allowed || targetKey === caller.sessionKey) return withoutLineage;
  // `tree` is the caller and all it spawned, at any depth (docs/concepts/subagents.md, Visibility).
  const isDescendant = await svc.sessions.isDescendantOf(caller.sessionKey, targetKey);
  return isDescendant ? checkVisibility(svc.config, { ...input, isDescendant }) : withoutLineage;
}

/**
 * Whether a session found by label or sessionId may be named to the caller. A sandboxed caller is
 * not told whether a session it cannot see exists (docs/concepts/tools.md, "Visibility"): a match
 * the guard would refuse (for a caller restricted to spawned: one that does not descend from it)
 * counts as no match at all, as OpenClaw looks it up among the caller's spawned sessions only.
 */
export async function mayFind(svc: ToolDeps, caller: ToolCaller, targetKey: string): Promise<boolean> {
  if (!caller.sandboxed || targetKey === caller.sessionKey) return true;
  return (await guard(svc, caller, "list", targetKey)).allowed;
}
