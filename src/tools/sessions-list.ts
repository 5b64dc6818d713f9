/**
 * sessions_list (docs/concepts/tools.md, "sessions_list"): rows the caller may see, newest first, from the Redis
 * indexes
 * in O(limit): `self` is one entry, `tree` the caller plus its descendants (children index,
 * breadth first), `agent` the agent index, `all` the global index (cross-agent rows only where
 * agent-to-agent allows them, or that the caller spawned).
 */
import type { ToolDeps } from "./tool-deps.js";
import { mapLimit } from "./map-limit.js";
import type { SessionKind } from "../session/session-entry.js";
import type { SessionEntry } from "../session/session-entry.js";
import { MAX_LINEAGE_DEPTH } from "../storage/session-store.js";
import type { ToolCaller, ToolResult } from "./tool-context.js";
import { argsError } from "./tool-context.js";
import { deriveTitle, toRow, type SessionRow } from "./session-row.js";
import { SessionsListArgs } from "./schemas.js";
import { restrictedToSpawned, visibilityOf } from "./access.js";
import { agentToAgentAllowed } from "./visibility.js";
import type { TranscriptMessage } from "../history/transcript-types.js";
import { messageRawText } from "../history/extract-reply.js";
import { sanitizeHistory } from "../history/sanitize-history.js";
import { topicOpt, transcriptTopicOf } from "../session/transcript-topic.js";
import { open, type FileHandle } from "node:fs/promises";
import { truncateUtf16Safe } from "../history/truncate.js";
import { scanLines } from "../transcript/tail-reader.js";

export const LIST_LIMIT_MAX = 200;
export const MESSAGE_LIMIT_MAX = 20;
const KINDS = new Set(["main", "group", "cron", "hook", "node", "other"]);

function isToolMessage(m: TranscriptMessage): boolean {
  return m.role === "toolResult" || m.role === "tool";
}

/** Bytes read from the start of a transcript for its title (OpenClaw reads its first 8 KB). */
const TITLE_SCAN_BYTES = 64 * 1024;

/**
 * The first message a person wrote (inter-session messages skipped), from the head of the
 * file only: the cost of a title never depends on how long the conversation has grown.
 */
async function firstUserText(file: string): Promise<string | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(file, "r");
  } catch {
    return undefined;
  }
  try {
    const end = Math.min((await fh.stat()).size, TITLE_SCAN_BYTES);
    for await (const { entry } of scanLines(fh, 0, end)) {
      const m = entry?.type === "message" ? entry.message : undefined;
      if (m?.role === "user" && m.provenance?.kind !== "inter_session") return messageRawText(m);
    }
    return undefined;
  } finally {
    await fh.close();
  }
}

export async function sessionsList(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionsListArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  const args = parsed.data;
  const limit = Math.min(args.limit ?? LIST_LIMIT_MAX, LIST_LIMIT_MAX);
  const kinds = (args.kinds ?? []).map((k) => k.toLowerCase()).filter((k) => KINDS.has(k)) as SessionKind[];
  const visibility = visibilityOf(svc, caller);
  const restrictToSpawned = restrictedToSpawned(svc, caller);
  const globalAlias = svc.config.session.scope === "global";
  const query = {
    limit,
    ...(kinds.length ? { kinds } : {}),
    ...(args.activeMinutes ? { activeMinutes: args.activeMinutes } : {}),
    ...(args.search ? { search: args.search } : {}),
    ...(args.label ? { label: args.label } : {}),
    includeReserved: globalAlias,
  };

  // Everything the caller spawned, at any depth (the guard's `tree` rule). Under `all` they
  // stay reachable across agents whatever agent-to-agent says (#55983), so they are needed there too.
  const spawned =
    visibility === "tree" || visibility === "all" || restrictToSpawned
      ? await svc.sessions.list({ ...query, spawnedBy: caller.sessionKey, spawnedByDepth: MAX_LINEAGE_DEPTH })
      : [];
  const descendants = new Set(spawned.map((e) => e.key));
  let entries: SessionEntry[];
  if (visibility === "self") {
    const self = await svc.sessions.get(caller.sessionKey);
    entries = self ? [self] : [];
  } else if (visibility === "tree" || restrictToSpawned) {
    const self = restrictToSpawned ? null : await svc.sessions.get(caller.sessionKey);
    entries = [...(self ? [self] : []), ...spawned];
  } else {
    const sameAgentOnly = visibility === "agent" || !svc.config.tools.agentToAgent.enabled;
    const agentId = args.agentId ?? (sameAgentOnly ? caller.agentId : undefined);
    // With agent-to-agent off the agent index has none of them: the caller's cross-agent
    // descendants are added (the guard lets history/send/status reach them).
    const ownCrossAgent =
      visibility === "all" && sameAgentOnly
        ? spawned.filter((e) => e.agentId !== caller.agentId && (!args.agentId || e.agentId === args.agentId))
        : [];
    // Agents the allow list refuses are left out while the index is read, so they cannot fill
    // the page; the caller's own descendants among them are added back (the guard lets it reach them).
    const allowed = (a: string) =>
      a === caller.agentId || agentToAgentAllowed(svc.config, caller.agentId, a) === "allowed";
    const own =
      sameAgentOnly && agentId !== caller.agentId
        ? []
        : await svc.sessions.list({ ...query, ...(agentId ? { agentId } : { agentAllowed: allowed }) });
    const refusedDescendants =
      visibility === "all" && !sameAgentOnly
        ? spawned.filter((e) => !allowed(e.agentId) && (!args.agentId || e.agentId === args.agentId))
        : [];
    entries = [...own, ...ownCrossAgent, ...refusedDescendants];
  }

  // Newest first before the limit cuts (the caller's own row comes first only if it is newest).
  entries.sort((a, b) => b.updatedAt - a.updatedAt);
  const rows: SessionRow[] = [];
  const listed = new Set<string>();
  for (const e of entries) {
    if (listed.has(e.key) || e.key === "unknown" || (e.key === "global" && !globalAlias)) continue;
    if (args.agentId && e.agentId !== args.agentId) continue;
    if (kinds.length && !kinds.includes(e.kind)) continue;
    if (args.label && e.label !== args.label) continue;
    if (args.activeMinutes && e.updatedAt < Date.now() - args.activeMinutes * 60_000) continue;
    if (args.search) {
      const hay = [e.key, e.label, e.displayName, e.subject, e.sessionId].filter(Boolean).join("\n").toLowerCase();
      if (!hay.includes(args.search.toLowerCase())) continue;
    }
    if (e.agentId !== caller.agentId && agentToAgentAllowed(svc.config, caller.agentId, e.agentId) !== "allowed") {
      if (!descendants.has(e.key) || visibility === "self") continue;
    }
    listed.add(e.key);
    rows.push(
      toRow(svc.config, e, caller.agentId, svc.transcripts.path(e.agentId, e.sessionId, transcriptTopicOf(e.key))),
    );
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
      const recent = await svc.transcripts.messages(
        e.agentId,
        e.sessionId,
        Math.max(messageLimit, 1) * 3,
        topicOpt(e.key),
      );
      const visible = recent.filter((m) => !isToolMessage(m));
      // Exactly sessions_history's view (reasoning stripped, credentials masked, sizes capped):
      // listing must not be a way around what reading a history hides.
      if (messageLimit > 0) Object.assign(row, sanitizeHistory(visible.slice(-messageLimit)));
      if (args.includeLastMessage) {
        const last = sanitizeHistory(visible.slice(-1)).messages[0];
        if (last) row.lastMessage = truncateUtf16Safe(messageRawText(last).replace(/\s+/g, " "), 240);
      }
    }
    const firstUser =
      args.includeDerivedTitles && !e.displayName && !e.subject
        ? await firstUserText(svc.transcripts.path(e.agentId, e.sessionId, transcriptTopicOf(e.key)))
        : undefined;
    row.title = deriveTitle(e, firstUser);
  });
  return { count: rows.length, sessions: rows };
}
