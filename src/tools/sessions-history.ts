/**
 * sessions_history (docs/concepts/tools.md, "sessions_history"): the sanitised, redacted, size-capped tail of a
 * session's
 * transcript. Reads only the tail of the file (O(limit)), never the whole transcript.
 */
import type { ToolDeps } from "./tool-deps.js";
import { topicOpt } from "../session/transcript-topic.js";
import { sanitizeHistory } from "../history/sanitize-history.js";
import { displaySessionKey } from "../session/key-canonical.js";
import { guard } from "./access.js";
import { resolveSessionRef } from "./resolve-ref.js";
import { SessionsHistoryArgs } from "./schemas.js";
import { argsError, type ToolCaller, type ToolResult } from "./tool-context.js";

/** OpenClaw's chat.history bounds: 200 by default, 1000 at most. */
const DEFAULT_LIMIT = 200;
const MAX_LIMIT = 1000;

export async function sessionsHistory(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionsHistoryArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  const args = parsed.data;
  const ref = await resolveSessionRef(svc, caller, args.sessionKey);
  if (!ref.ok) return { status: ref.status, error: ref.error };
  const g = await guard(svc, caller, "history", ref.key);
  if (!g.allowed) return { status: g.status, error: g.error };
  const entry = await svc.sessions.get(ref.key);
  const displayKey = displaySessionKey(svc.config, ref.key, caller.agentId);
  if (!entry)
    return {
      sessionKey: displayKey,
      messages: [],
      truncated: false,
      droppedMessages: false,
      contentTruncated: false,
      contentRedacted: false,
      bytes: 2,
    };
  const limit = Math.min(args.limit ?? DEFAULT_LIMIT, MAX_LIMIT);
  const messages = await svc.transcripts.messages(entry.agentId, entry.sessionId, limit, topicOpt(entry.key));
  const result = sanitizeHistory(messages, { includeTools: args.includeTools ?? false });
  return { sessionKey: displayKey, ...result };
}
