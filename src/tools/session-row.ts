/** The row shape of sessions_list (the seeds' shape plus title, preview and transcript path). */
import type { Config } from "../config/schema.js";
import { displaySessionKey } from "../session/key-canonical.js";
import { channelFromKey } from "../session/key-classify.js";
import type { SessionEntry } from "../session/session-entry.js";
import { redactSecrets } from "../history/redact.js";
import { truncateUtf16Safe } from "../history/truncate.js";
import type { TranscriptMessage } from "../history/transcript-types.js";

export interface SessionRow {
  key: string;
  kind: string;
  channel: string;
  label?: string;
  displayName?: string;
  title?: string;
  lastMessage?: string;
  spawnedBy?: string;
  parentSessionKey?: string;
  deliveryContext?: SessionEntry["deliveryContext"];
  updatedAt: number;
  sessionId: string;
  model?: string;
  contextTokens?: number;
  totalTokens?: number;
  thinkingLevel?: string;
  verboseLevel?: string;
  systemSent?: boolean;
  abortedLastRun?: boolean;
  sendPolicy?: string;
  lastChannel?: string;
  lastTo?: string;
  lastAccountId?: string;
  transcriptPath: string;
  messages?: TranscriptMessage[];
  /** With `messages`: the same flags sessions_history reports for its view. */
  truncated?: boolean;
  droppedMessages?: boolean;
  contentTruncated?: boolean;
  contentRedacted?: boolean;
  bytes?: number;
}

/** cron/hook/node sessions talk on the internal channel; else the recorded one, else from the key. */
export function deriveChannel(e: SessionEntry): string {
  if (e.kind === "cron" || e.kind === "hook" || e.kind === "node") return "internal";
  return (
    e.channel ?? e.origin?.provider ?? e.deliveryContext?.channel ?? e.lastChannel ?? channelFromKey(e.key) ?? "unknown"
  );
}

const TITLE_MAX = 60;

/** displayName › subject › first user message (60 chars, cut at a word) › id prefix and date. */
export function deriveTitle(e: SessionEntry, firstUserText?: string): string {
  if (e.displayName) return e.displayName;
  if (e.subject) return e.subject;
  // Masked as sessions_history masks it: a title must not show what reading the history hides.
  const text = firstUserText === undefined ? undefined : redactSecrets(firstUserText.replace(/\s+/g, " ").trim()).text;
  if (text) {
    if (text.length <= TITLE_MAX) return text;
    const cut = truncateUtf16Safe(text, TITLE_MAX);
    const space = cut.lastIndexOf(" ");
    return `${space > TITLE_MAX * 0.6 ? cut.slice(0, space) : cut}…`;
  }
  return `${e.sessionId.slice(0, 8)} (${new Date(e.updatedAt).toISOString().slice(0, 10)})`;
}

export function toRow(config: Config, e: SessionEntry, requesterAgent: string, transcriptPath: string): SessionRow {
  const opt = <K extends keyof SessionEntry>(k: K) => (e[k] !== undefined ? { [k]: e[k] } : {});
  return {
    key: displaySessionKey(config, e.key, requesterAgent),
    kind: e.kind,
    channel: deriveChannel(e),
    ...opt("label"),
    ...opt("displayName"),
    ...(e.spawnedBy ? { spawnedBy: displaySessionKey(config, e.spawnedBy, requesterAgent) } : {}),
    ...opt("parentSessionKey"),
    ...opt("deliveryContext"),
    updatedAt: e.updatedAt,
    sessionId: e.sessionId,
    ...((e.modelOverride ?? e.model) ? { model: e.modelOverride ?? e.model } : {}),
    ...opt("contextTokens"),
    totalTokens: e.totalTokens ?? 0,
    ...opt("thinkingLevel"),
    ...opt("verboseLevel"),
    systemSent: e.systemSent ?? false,
    abortedLastRun: e.abortedLastRun ?? false,
    ...opt("sendPolicy"),
    ...opt("lastChannel"),
    ...opt("lastTo"),
    ...opt("lastAccountId"),
    transcriptPath,
  };
}
