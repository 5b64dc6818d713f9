/**
 * The caller of a session tool called from outside any run (the HTTP tool door, the MCP
 * server): the session acts as itself at hop 0, with the sandbox flag and the sub-agent lineage
 * its stored entry records, so visibility and tool profiles apply as they do inside its turns.
 */
import type { Services } from "../app/services.js";
import { defaultAgentId, isAgentSandboxed } from "../config/agents.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { agentIdFromSessionKey } from "../session/key-parse.js";
import type { ToolCaller } from "./tool-context.js";

export async function sessionCaller(svc: Services, rawSessionKey: string, sandboxed?: boolean): Promise<ToolCaller> {
  const sessionKey = canonicalSessionKey(svc.config, rawSessionKey);
  const agentId = agentIdFromSessionKey(sessionKey, defaultAgentId(svc.config));
  // Read on every call: the entry (sandbox, lineage) may change while a client stays connected.
  const entry = await svc.sessions.get(sessionKey);
  return {
    sessionKey,
    agentId,
    sandboxed: sandboxed ?? entry?.sandboxed ?? isAgentSandboxed(svc.config, agentId),
    hop: 0,
    ...(entry?.spawnDepth ? { spawnDepth: entry.spawnDepth } : {}),
    ...(entry?.subagentRole ? { subagentRole: entry.subagentRole } : {}),
  };
}
