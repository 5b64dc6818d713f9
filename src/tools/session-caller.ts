/**
 * The caller of a session tool called from outside any run (the HTTP tool door, the MCP
 * server): the session acts as itself at hop 0, with the sandbox flag and the sub-agent lineage
 * its stored entry records, so visibility and tool profiles apply as they do inside its turns.
 */
import type { ToolDeps } from "./tool-deps.js";
import { defaultAgentId, isAgentSandboxed } from "../config/agents.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { agentIdFromSessionKey } from "../session/key-parse.js";
import { shouldResolveSessionIdInput } from "../session/session-id.js";
import type { SessionEntry } from "../session/session-entry.js";
import type { ToolCaller } from "./tool-context.js";

/**
 * The calling session: a key (canonicalised), or — as everywhere a key is accepted — the
 * sessionId of a stored session. A stored key always wins over an equal-looking sessionId.
 */
export async function resolveCaller(
  svc: ToolDeps,
  raw: string,
): Promise<{ sessionKey: string; entry: SessionEntry | null }> {
  const sessionKey = canonicalSessionKey(svc.config, raw);
  const entry = await svc.sessions.get(sessionKey);
  if (entry || !shouldResolveSessionIdInput(raw.trim())) return { sessionKey, entry };
  const byId = await svc.sessions.keyForSessionId(raw.trim());
  return byId ? { sessionKey: byId, entry: await svc.sessions.get(byId) } : { sessionKey, entry };
}

export async function sessionCaller(svc: ToolDeps, rawSessionKey: string, sandboxed?: boolean): Promise<ToolCaller> {
  // Read on every call: the entry (sandbox, lineage) may change while a client stays connected.
  const { sessionKey, entry } = await resolveCaller(svc, rawSessionKey);
  const agentId = agentIdFromSessionKey(sessionKey, defaultAgentId(svc.config));
  return {
    sessionKey,
    agentId,
    sandboxed: sandboxed ?? entry?.sandboxed ?? isAgentSandboxed(svc.config, agentId),
    hop: 0,
    ...(entry?.spawnDepth ? { spawnDepth: entry.spawnDepth } : {}),
    ...(entry?.subagentRole ? { subagentRole: entry.subagentRole } : {}),
  };
}
