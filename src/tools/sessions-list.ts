/**
 * sessions_list (REFERENCE §5.2): rows the caller may see, newest first, from the Redis indexes
 * in O(limit): `self` is one entry, `tree` the caller plus its children, `agent` the agent
 * index, `all` the global index (cross-agent rows only where agent-to-agent allows them).
 */
import type { Services } from "../app/services.js";
import { mapLimit } from "./map-limit.js";
import type { SessionKind } from "../storage/session-entry.js";
import type { SessionEntry } from "../storage/session-entry.js";
import type { ToolCaller, ToolResult } from "./tool-context.js";
import { toolError } from "./tool-context.js";
import { deriveTitle, toRow, type SessionRow } from "./session-row.js";
import { SessionsListArgs } from "./schemas.js";
import { visibilityOf } from "./access.js";
import { agentToAgentAllowed } from "./visibility.js";
import { zodIssues } from "../config/parse.js";
import type { TranscriptMessage } from "../transcript/types.js";
import { messageRawText } from "../history/extract-reply.js";

export const LIST_LIMIT_MAX = 200;
export const MESSAGE_LIMIT_MAX = 20;
const KINDS = new Set(["main", "group", "cron", "hook", "node", "other"]);

function isToolMessage(m: TranscriptMessage): boolean {
  return m.role === "toolResult" || m.role === "tool";
}

export async function sessionsList(svc: Services, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionsListArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return toolError(zodIssues(parsed.error).map((i) => `${i.path}: ${i.message}`).join("; "));
  const args = parsed.data;
  const limit = Math.min(args.limit ?? LIST_LIMIT_MAX, LIST_LIMIT_MAX);
  const kinds = (args.kinds ?? []).map((k) => k.toLowerCase()).filter((k) => KINDS.has(k)) as SessionKind[];
  const visibility = visibilityOf(svc, caller);
  const restrictToSpawned = caller.sandboxed && svc.config.agents.defaults.sandbox.sessionToolsVisibility === "spawned" && !caller.sessionKey.includes(":subagent:");
  const globalAlias = svc.config.session.scope === "global";
  const query = {
    limit,
    ...(kinds.length ? { kinds } : {}),
    ...(args.activeMinutes ? { activeMinutes: args.activeMinutes } : {}),
    ...(args.search ? { search: args.search } : {}),
    ...(args.label ? { label: args.label } : {}),
    includeReserved: globalAlias,
  };

  let entries: SessionEntry[];
  if (visibility === "self") {
    const self = await svc.sessions.get(caller.sessionKey);
    entries = self ? [self] : [];
  } else if (visibility === "tree" || restrictToSpawned) {
    const children = await svc.sessions.list({ ...query, spawnedBy: caller.sessionKey });
    const self = restrictToSpawned ? null : await svc.sessions.get(caller.sessionKey);
    entries = [...(self ? [self] : []), ...children];
  } else {
    const sameAgentOnly = visibility === "agent" || !svc.config.tools.agentToAgent.enabled;
    const agentId = args.agentId ?? (sameAgentOnly ? caller.agentId : undefined);
    if (sameAgentOnly && agentId !== caller.agentId) return { count: 0, sessions: [] };
    entries = await svc.sessions.list({ ...query, ...(agentId ? { agentId } : {}) });
  }

  const rows: SessionRow[] = [];
  for (const e of entries) {
    if (e.key === "unknown" || (e.key === "global" && !globalAlias)) continue;
    if (args.agentId && e.agentId !== args.agentId) continue;
    if (kinds.length && !kinds.includes(e.kind)) continue;
    if (args.label && e.label !== args.label) continue;
    if (args.activeMinutes && e.updatedAt < Date.now() - args.activeMinutes * 60_000) continue;
    if (args.search) {
      const hay = [e.key, e.label, e.displayName, e.subject, e.sessionId].filter(Boolean).join("\n").toLowerCase();
      if (!hay.includes(args.search.toLowerCase())) continue;
    }
    if (e.agentId !== caller.agentId && agentToAgentAllowed(svc.config, caller.agentId, e.agentId) !== "allowed") {
      const child = e.spawnedBy === caller.sessionKey;
      if (!child || visibility === "self") continue;
    }
    rows.push(toRow(svc.config, e, caller.agentId, svc.transcripts.path(e.agentId, e.sessionId)));
    if (rows.length >= limit) break;
  }
  rows.sort((a, b) => b.updatedAt - a.updatedAt);

  const messageLimit = Math.min(args.messageLimit ?? 0, MESSAGE_LIMIT_MAX);
  const byKey = new Map(entries.map((e) => [e.key, e]));
  // At most 4 transcript reads at once, as OpenClaw does.
  await mapLimit(rows, 4, async (row) => {
    const e = entries.find((x) => x.sessionId === row.sessionId) ?? byKey.get(row.key);
    if (!e) return;
    if (messageLimit > 0 || args.includeLastMessage) {
      const recent = await svc.transcripts.messages(e.agentId, e.sessionId, Math.max(messageLimit, 1) * 3);
      const visible = recent.filter((m) => !isToolMessage(m));
      if (messageLimit > 0) row.messages = visible.slice(-messageLimit);
      if (args.includeLastMessage) {
        const last = visible[visible.length - 1];
        if (last) row.lastMessage = messageRawText(last).replace(/\s+/g, " ").slice(0, 240);
      }
    }
    let firstUser: string | undefined;
    if (args.includeDerivedTitles && !e.displayName && !e.subject) {
      const head = await svc.transcripts.messages(e.agentId, e.sessionId, 1000);
      const first = head.find((m) => m.role === "user" && m.provenance?.kind !== "inter_session");
      firstUser = first ? messageRawText(first) : undefined;
    }
    row.title = deriveTitle(e, firstUser);
  });
  return { count: rows.length, sessions: rows };
}
