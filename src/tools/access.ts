/** The visibility guard with its one I/O need (is the target a child of the caller?). */
import type { Services } from "../app/services.js";
import { defaultAgentId } from "../config/agents.js";
import { agentIdFromSessionKey } from "../session/key-parse.js";
import type { ToolCaller } from "./tool-context.js";
import { checkVisibility, effectiveVisibility, type GuardAction, type GuardResult, type Visibility } from "./visibility.js";

export function visibilityOf(svc: Services, caller: ToolCaller): Visibility {
  return effectiveVisibility(svc.config, caller.sandboxed);
}

/** A sandboxed caller limited to what it spawned (REFERENCE §5.1 `restrictToSpawned`). */
export function restrictedToSpawned(svc: Services, caller: ToolCaller): boolean {
  return caller.sandboxed && svc.config.agents.defaults.sandbox.sessionToolsVisibility === "spawned" && !caller.sessionKey.includes(":subagent:");
}

export async function guard(svc: Services, caller: ToolCaller, action: GuardAction, targetKey: string): Promise<GuardResult> {
  const visibility = visibilityOf(svc, caller);
  const isSpawnedChild = targetKey !== caller.sessionKey && (await isDescendant(svc, caller.sessionKey, targetKey));
  return checkVisibility(svc.config, {
    action,
    visibility,
    requesterKey: caller.sessionKey,
    requesterAgent: caller.agentId,
    targetKey,
    targetAgent: agentIdFromSessionKey(targetKey, defaultAgentId(svc.config)),
    isSpawnedChild,
  });
}

/** Lineage depth bound (maxSpawnDepth is at most 5), so a walk up always ends. */
const MAX_LINEAGE_WALK = 8;

/** `tree` covers the requester's descendants: walk the target's stored `spawnedBy` chain up. */
export async function isDescendant(svc: Services, ancestorKey: string, targetKey: string): Promise<boolean> {
  if (await svc.sessions.isChildOf(ancestorKey, targetKey)) return true;
  let key: string | undefined = targetKey;
  for (let i = 0; key && i < MAX_LINEAGE_WALK; i++) {
    const entry = await svc.sessions.get(key);
    key = entry?.spawnedBy;
    if (key === ancestorKey) return true;
  }
  return false;
}
