/**
 * Which session tools a session may call, as a plain function: the profile, `alsoAllow`,
 * `deny`, then the sub-agent rules (leaf sub-agents get none; orchestrators get the tools that
 * manage their own children), re-granted by `tools.subagents.tools`. `deny` always wins.
 * The role comes from the stored session entry, never from the key alone.
 */
import type { Config } from "../config/schema.js";

export const ALL_SESSION_TOOLS = [
  "sessions_list",
  "sessions_history",
  "sessions_send",
  "session_status",
  "sessions_spawn",
  "agents_list",
  "sessions_yield",
  "subagents",
] as const;
export type SessionToolName = (typeof ALL_SESSION_TOOLS)[number];

const PROFILES: Record<Config["tools"]["profile"], readonly SessionToolName[]> = {
  minimal: ["session_status"],
  messaging: ["sessions_list", "sessions_history", "sessions_send", "session_status"],
  coding: ALL_SESSION_TOOLS,
  full: ALL_SESSION_TOOLS,
};

/** What a depth-1 orchestrator keeps (maxSpawnDepth >= 2). */
export const ORCHESTRATOR_TOOLS: readonly SessionToolName[] = [
  "sessions_spawn",
  "subagents",
  "sessions_list",
  "sessions_history",
  "sessions_yield",
];

export interface ToolSubject {
  /** From the stored entry: 0 (or absent) for sessions nobody spawned. */
  spawnDepth?: number;
  subagentRole?: "orchestrator" | "leaf";
}

export function effectiveTools(config: Config, subject: ToolSubject): SessionToolName[] {
  const t = config.tools;
  const known = (n: string): n is SessionToolName => (ALL_SESSION_TOOLS as readonly string[]).includes(n);
  const set = new Set<SessionToolName>(PROFILES[t.profile]);
  for (const n of t.alsoAllow) if (known(n)) set.add(n);
  if ((subject.spawnDepth ?? 0) > 0) {
    const base: readonly SessionToolName[] = subject.subagentRole === "orchestrator" ? ORCHESTRATOR_TOOLS : [];
    const sub = t.subagents.tools;
    const granted = new Set<SessionToolName>(sub.allow ? sub.allow.filter(known) : base);
    for (const n of sub.alsoAllow) if (known(n)) granted.add(n);
    for (const n of [...set]) if (!granted.has(n)) set.delete(n);
    for (const n of sub.alsoAllow) if (known(n)) set.add(n);
    for (const n of sub.deny) set.delete(n as SessionToolName);
  }
  for (const n of t.deny) set.delete(n as SessionToolName);
  return ALL_SESSION_TOOLS.filter((n) => set.has(n));
}

export function toolForbiddenError(name: string): string {
  return (
    `Tool ${name} is not available to this session (see tools.profile, tools.alsoAllow, ` +
    `tools.deny and tools.subagents.tools; /tools shows the list).`
  );
}
