/**
 * Reading facts back out of a session key: chat type, list kind, thread, channel, sub-agent
 * depth (docs/concepts/sessions.md, "Reading facts from a key"). Used when the session entry does not say (fresh keys,
 * imported stores) and by sendPolicy matching. Every helper classifies the agent-stripped,
 * lowercased rest, so `agent:<a>:` never confuses a match.
 */
import type { Config } from "../config/schema.js";
import { parseAgentSessionKey, parseThreadSuffix, stripAgentPrefix } from "./key-parse.js";

export type KeyChatType = "dm" | "group" | "channel" | "unknown";
export type SessionKind = "main" | "group" | "cron" | "hook" | "node" | "other";

/**
 * Roots of keys that are not conversations (cron jobs, webhooks, sub-agents, ACP harnesses,
 * nodes): their later segments are free-form ids, so `cron:dm:run:x` must not read as a DM.
 */
export function isNonChatRoot(firstSegment: string | undefined): boolean {
  if (!firstSegment) return false;
  return ["cron", "hook", "subagent", "acp", "node"].includes(firstSegment) || firstSegment.startsWith("node-");
}

/** Segments of the agent-stripped, lowercased key, empty ones dropped. */
export function restSegments(key: string | null | undefined): string[] {
  return stripAgentPrefix(key).split(":").filter(Boolean);
}

/** `dm`/`direct` → `dm`; `group`, `channel` kept; anything else undefined. */
export function normalizeChatType(value: string | null | undefined): "dm" | "group" | "channel" | undefined {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "dm" || v === "direct") return "dm";
  if (v === "group" || v === "channel") return v;
  return undefined;
}

/** Index of the first chat-kind marker (`dm`/`direct`/`group`/`channel`) that is followed by an id. */
export function chatMarkerIndex(segs: readonly string[]): number {
  if (isNonChatRoot(segs[0])) return -1;
  return segs.findIndex(
    (s, i) => i < segs.length - 1 && (s === "dm" || s === "direct" || s === "group" || s === "channel"),
  );
}

const LEGACY_WHATSAPP_GROUP_RE = /^[0-9]+(?:-[0-9]+)*@g\.us$/;
const LEGACY_WHATSAPP_PREFIXED_RE = /^whatsapp:(?!.*:group:).+@g\.us$/;
const LEGACY_DISCORD_GUILD_RE = /^discord:(?:[^:]+:)?guild-[^:]+:channel-[^:]+$/;

/**
 * `dm` | `group` | `channel` | `unknown` from the key alone. The first marker decides (so a
 * peer literally named `group` in `…:dm:group` stays a DM); legacy WhatsApp `@g.us` ids and
 * Discord `guild-X:channel-Y` keys are recognised as upstream does.
 */
export function chatTypeFromKey(key: string | null | undefined): KeyChatType {
  const rest = stripAgentPrefix(key);
  if (!rest) return "unknown";
  const segs = rest.split(":").filter(Boolean);
  const marker = segs[chatMarkerIndex(segs)];
  if (marker) return normalizeChatType(marker) ?? "unknown";
  if (LEGACY_WHATSAPP_GROUP_RE.test(rest) || LEGACY_WHATSAPP_PREFIXED_RE.test(rest)) return "group";
  if (LEGACY_DISCORD_GUILD_RE.test(rest)) return "channel";
  return "unknown";
}

/**
 * `sessions_list` kind, classified on the agent-stripped rest (docs/concepts/sessions.md,
 * "Reading facts from a key"; this fixes OpenClaw's raw-key comparison): the main alias → main;
 * `cron:`, `hook:`, `node-`/`node:` roots; group/channel
 * conversations (threads included) → group; else other. `opts.chatType` (from the session
 * entry) can mark a key group that does not say so itself.
 */
export function sessionKindFromKey(
  config: Config,
  key: string,
  opts: { chatType?: string | undefined } = {},
): SessionKind {
  const lower = key.trim().toLowerCase();
  if (lower === "global") return "main";
  const rest = parseAgentSessionKey(lower)?.rest ?? lower;
  if (rest === config.session.mainKey || rest === "main") return "main";
  if (rest.startsWith("cron:")) return "cron";
  if (rest.startsWith("hook:")) return "hook";
  if (rest.startsWith("node-") || rest.startsWith("node:")) return "node";
  const chatType = normalizeChatType(opts.chatType);
  if (chatType === "group" || chatType === "channel") return "group";
  if (
    rest.startsWith("group:") ||
    rest.startsWith("channel:") ||
    rest.includes(":group:") ||
    rest.includes(":channel:")
  ) {
    return "group";
  }
  return "other";
}

/** Telegram forum topic id from `telegram:group:<chat>:topic:<n>` (only Telegram: Feishu ids embed `:topic:` too). */
function telegramTopicId(segs: readonly string[]): string | undefined {
  if (segs[0] !== "telegram") return undefined;
  const idx = segs.lastIndexOf("topic");
  return idx >= 3 && idx < segs.length - 1 ? segs.slice(idx + 1).join(":") : undefined;
}

/** `:thread:<id>` suffix, or a Telegram forum topic (reset type `thread`). */
export function isThreadSessionKey(key: string | null | undefined): boolean {
  return threadIdFromKey(key) !== undefined;
}

/** The thread id (original case for `:thread:`), or the Telegram topic id; undefined otherwise. */
export function threadIdFromKey(key: string | null | undefined): string | undefined {
  const { threadId } = parseThreadSuffix(key);
  return threadId ?? telegramTopicId(restSegments(key));
}

/**
 * The channel segment of `<ch>:group|channel|dm:<id>` and `<ch>:<acct>:dm:<peer>` (after
 * stripping `agent:<id>:`); undefined for main, per-peer DMs, cron, hooks, sub-agents, …
 */
export function channelFromKey(key: string | null | undefined): string | undefined {
  const segs = restSegments(key);
  const idx = chatMarkerIndex(segs);
  if (idx === 1) return segs[0];
  if (idx === 2 && (segs[2] === "dm" || segs[2] === "direct")) return segs[0];
  return undefined;
}

export interface AnnounceTarget {
  channel: string;
  to: string;
  threadId?: string;
  /** Only for per-account DMs (`<ch>:<acct>:dm:<peer>`): the bot account that owns the chat. */
  accountId?: string;
}

/**
 * Where a session's replies are posted when all we have is its key
 * (docs/concepts/sessions.md, "Reading facts from a key"):
 * groups/channels → `to: "<kind>:<id>"` (Telegram: the bare chat id, topic as threadId),
 * DMs → the peer id, `:thread:<id>` → threadId. Main, per-peer and `unknown`-channel keys have
 * no recoverable route → undefined; callers should prefer a stored deliveryContext, which
 * also covers identity-linked peers whose key holds a name, not an address.
 */
export function announceTargetFromKey(key: string | null | undefined): AnnounceTarget | undefined {
  const { baseSessionKey, threadId: suffixThread } = parseThreadSuffix(stripAgentPrefix(key));
  const segs = baseSessionKey.split(":").filter(Boolean);
  const idx = chatMarkerIndex(segs);
  const channel = segs[0];
  if (idx < 1 || !channel || channel === "unknown") return undefined;
  const kind = normalizeChatType(segs[idx]);
  const target: AnnounceTarget = { channel, to: "" };
  if (kind === "dm") {
    if (idx > 2) return undefined;
    if (idx === 2) target.accountId = segs[1] as string;
    target.to = segs.slice(idx + 1).join(":");
  } else {
    if (idx !== 1 || !kind) return undefined;
    let idSegs = segs.slice(2);
    if (channel === "telegram") {
      const topic = telegramTopicId(segs);
      if (topic !== undefined) {
        target.threadId = topic;
        idSegs = segs.slice(2, segs.lastIndexOf("topic"));
      }
      target.to = idSegs.join(":");
    } else {
      target.to = `${kind}:${idSegs.join(":")}`;
    }
  }
  if (suffixThread !== undefined) target.threadId = suffixThread;
  return target;
}

/** Nesting depth: occurrences of `:subagent:` (a bare `subagent:x` counts as depth 1). */
export function subagentDepthFromKey(key: string | null | undefined): number {
  const lower = `:${(key ?? "").trim().toLowerCase()}`;
  return lower.split(":subagent:").length - 1;
}

export function isSubagentKey(key: string | null | undefined): boolean {
  return subagentDepthFromKey(key) > 0;
}

/** An isolated cron run: `[agent:<a>:]cron:<jobId>:run:<runId>`. */
export function isCronRunKey(key: string | null | undefined): boolean {
  return /^cron:[^:]+:run:[^:]+$/.test(stripAgentPrefix(key));
}
