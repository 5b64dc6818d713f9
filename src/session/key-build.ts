/**
 * Building session keys for inbound messages (docs/concepts/sessions.md, "Routing inbound messages").
 *
 * Pure: config + message in, keys out. Switchboard emits `dm` where April's OpenClaw emits
 * `direct`. Every segment is lowercased here, so the results are already canonical.
 */
import { defaultAgentId } from "../config/agents.js";
import type { Config } from "../config/schema.js";
import { InvalidSessionKeyError } from "../errors/index.js";
import { assertAgentId, normalizeAccountId } from "./agent-id.js";

export const MAX_SESSION_KEY_LENGTH = 512;

/** The fields key building needs; an `InboundMessage` fits, `direct` is tolerated for direct callers. */
export interface InboundSessionInput {
  channel: string;
  accountId?: string | undefined;
  chatType: "dm" | "direct" | "group" | "channel";
  from: string;
  groupId?: string | number | undefined;
  threadId?: string | number | undefined;
  agentId?: string | undefined;
}

export interface InboundSessionResolution {
  agentId: string;
  sessionKey: string;
  mainSessionKey: string;
}

/** `agent:<a>:<mainKey>`, or `global` with `scope: "global"`. */
export function mainSessionKeyFor(config: Config, agentId: string): string {
  if (config.session.scope === "global") return "global";
  return `agent:${assertAgentId(agentId)}:${config.session.mainKey}`;
}

/**
 * identityLinks (docs/concepts/sessions.md, "identityLinks"): candidates are `peer` and `channel:peer`, lowercased; the
 * first config entry (insertion order) listing a candidate wins and its name replaces the peer.
 */
export function resolveIdentityLink(config: Config, channel: string, peerId: string): string | undefined {
  const peer = peerId.trim().toLowerCase();
  if (!peer) return undefined;
  const candidates = new Set([peer]);
  if (channel) candidates.add(`${channel.trim().toLowerCase()}:${peer}`);
  for (const [name, ids] of Object.entries(config.session.identityLinks)) {
    const canonical = name.trim();
    if (!canonical) continue;
    if (ids.some((id) => candidates.has(id.trim().toLowerCase()))) return canonical;
  }
  return undefined;
}

/**
 * An id as key segments: trimmed, lowercased, and without empty `:`-segments. Every reader of a
 * key (the canonical parser, as OpenClaw's) drops empty segments, so an id such as `abc:` or
 * `fe80::1` written as it is would name a session no RPC or tool could reach: they would all act
 * on `abc` or `fe80:1` instead. Written the way it is read, the key means the same everywhere.
 */
function idSegments(raw: string | number | null | undefined): string {
  return String(raw ?? "")
    .trim()
    .toLowerCase()
    .split(":")
    .filter((part) => part !== "")
    .join(":");
}

/** `<base>:thread:<threadId lowercased>`; an empty thread id leaves the base unchanged. */
export function threadSessionKey(baseSessionKey: string, threadId: string | number | null | undefined): string {
  const id = idSegments(threadId);
  return id ? `${baseSessionKey}:thread:${id}` : baseSessionKey;
}

/** A fresh sub-agent session key: `agent:<agentId>:subagent:<uuid>`. */
export function subagentSessionKey(agentId: string, uuid: string): string {
  const id = uuid.trim().toLowerCase();
  if (!id || id.includes(":")) {
    throw new InvalidSessionKeyError(
      `agent:${agentId}:subagent:${uuid}`,
      "sub-agent id must be a non-empty segment without ':'",
    );
  }
  return `agent:${assertAgentId(agentId)}:subagent:${id}`;
}

function dmSessionKey(config: Config, agentId: string, channel: string, msg: InboundSessionInput): string {
  const dmScope = config.session.dmScope;
  let peer = msg.from.trim();
  if (dmScope !== "main") peer = resolveIdentityLink(config, channel, peer) ?? peer;
  peer = idSegments(peer);
  if (!peer || dmScope === "main") return `agent:${agentId}:${config.session.mainKey}`;
  if (dmScope === "per-account-channel-peer") {
    return `agent:${agentId}:${channel}:${normalizeAccountId(msg.accountId)}:dm:${peer}`;
  }
  if (dmScope === "per-channel-peer") return `agent:${agentId}:${channel}:dm:${peer}`;
  return `agent:${agentId}:dm:${peer}`;
}

/** Telegram's id for a forum's General topic: messages there belong to the chat's session. */
const TELEGRAM_GENERAL_TOPIC_ID = "1";

function groupSessionKey(
  agentId: string,
  channel: string,
  kind: "group" | "channel",
  msg: InboundSessionInput,
): string {
  // Never the accountId: a group is the same conversation whichever bot account hears it.
  const id = idSegments(msg.groupId) || "unknown";
  const base = `agent:${agentId}:${channel}:${kind}:${id}`;
  const threadId = idSegments(msg.threadId);
  if (channel === "telegram" && kind === "group") {
    // Telegram forum topics live inside the peer id (`<chatId>:topic:<n>`), not as a `:thread:`
    // suffix. The General topic (id 1) stays on the chat's own session, as in OpenClaw.
    return threadId && threadId !== TELEGRAM_GENERAL_TOPIC_ID ? `${base}:topic:${threadId}` : base;
  }
  return threadSessionKey(base, threadId);
}

/**
 * Which session an inbound message belongs to. `scope: "global"` maps everything to `global`.
 * `msg.agentId` (validated) picks the agent, else the default agent; whether that agent is
 * configured is the caller's business (this module has no opinion on routing).
 */
export function resolveInboundSession(config: Config, msg: InboundSessionInput): InboundSessionResolution {
  const agentId = msg.agentId !== undefined ? assertAgentId(msg.agentId) : defaultAgentId(config);
  const mainSessionKey = mainSessionKeyFor(config, agentId);
  if (config.session.scope === "global") return { agentId, sessionKey: "global", mainSessionKey };

  const channel = msg.channel.trim().toLowerCase() || "unknown";
  const sessionKey =
    msg.chatType === "group" || msg.chatType === "channel"
      ? groupSessionKey(agentId, channel, msg.chatType, msg)
      : threadSessionKey(dmSessionKey(config, agentId, channel, msg), msg.threadId);

  if (sessionKey.length > MAX_SESSION_KEY_LENGTH) {
    throw new InvalidSessionKeyError(`${sessionKey.slice(0, 80)}…`, `longer than ${MAX_SESSION_KEY_LENGTH} characters`);
  }
  return { agentId, sessionKey, mainSessionKey };
}
