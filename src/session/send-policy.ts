/**
 * sendPolicy (docs/concepts/sessions.md, "Send policy"): may this session send/reply at all? Evaluated on every inbound
 * message and every agent run, so it is pure and cheap. Order of precedence:
 * per-session override › config rules (first matching deny wins, any matching allow allows)
 * › config default › allow.
 */
import type { Config } from "../config/schema.js";
import { ValidationError } from "../errors/index.js";
import { channelFromKey, chatTypeFromKey, normalizeChatType } from "./key-classify.js";
import { stripAgentPrefix } from "./key-parse.js";

export type SendPolicyDecision = "allow" | "deny";

export interface SendPolicyEntry {
  sendPolicy?: string | null | undefined;
  channel?: string | null | undefined;
  lastChannel?: string | null | undefined;
  chatType?: string | null | undefined;
}

export interface SendPolicyContext {
  sessionKey: string;
  entry?: SendPolicyEntry | null | undefined;
  channel?: string | null | undefined;
  chatType?: string | null | undefined;
}

const OVERRIDE_WORDS: Record<string, SendPolicyDecision | null> = {
  allow: "allow",
  on: "allow",
  deny: "deny",
  off: "deny",
  inherit: null,
  default: null,
  reset: null,
};

export const INVALID_SEND_POLICY_MESSAGE = 'invalid sendPolicy (use "allow"|"deny")';

/**
 * A user/operator override (`/send on|off|inherit`, `sessions.patch {sendPolicy}`) →
 * `"allow"`, `"deny"` or `null` (clear, inherit config). null/undefined clear too.
 * Case-insensitive; anything else throws ValidationError `invalid sendPolicy (use "allow"|"deny")`.
 */
export function normalizeSendPolicyOverride(value: unknown): SendPolicyDecision | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") {
    const word = value.trim().toLowerCase();
    if (Object.hasOwn(OVERRIDE_WORDS, word)) return OVERRIDE_WORDS[word] as SendPolicyDecision | null;
  }
  throw new ValidationError(INVALID_SEND_POLICY_MESSAGE, [
    { path: "sendPolicy", message: INVALID_SEND_POLICY_MESSAGE },
  ]);
}

/** A stored override; unreadable values are ignored (inherit) rather than failing every send. */
function storedOverride(value: string | null | undefined): SendPolicyDecision | undefined {
  try {
    return normalizeSendPolicyOverride(value) ?? undefined;
  } catch {
    return undefined;
  }
}

function firstNonEmpty(...values: Array<string | null | undefined>): string | undefined {
  for (const v of values) {
    const t = v?.trim();
    if (t) return t;
  }
  return undefined;
}

/**
 * Key prefixes are compared lowercased, and a prefix written with OpenClaw's `direct`
 * segment also matches Switchboard's `dm` keys, so rules ported from OpenClaw keep working.
 */
function prefixVariants(prefix: string): string[] {
  const lower = prefix.trim().toLowerCase();
  const dm = lower.replace(/(^|:)direct(?=:|$)/g, "$1dm");
  return dm === lower ? [lower] : [lower, dm];
}

function startsWithAny(value: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => value.startsWith(p));
}

/**
 * `"allow"` or `"deny"` for a session. Channel and chat type come from the caller, else the
 * session entry, else the key itself. A rule matches when every field it sets matches:
 * `channel` (case-insensitive), `chatType` (`dm` ≡ `direct`), `rawKeyPrefix` (prefix of the
 * full key), `keyPrefix` (prefix of the full key or of the key without `agent:<id>:`).
 */
export function resolveSendPolicy(config: Config, ctx: SendPolicyContext): SendPolicyDecision {
  const override = storedOverride(ctx.entry?.sendPolicy);
  if (override) return override;

  const policy = config.session.sendPolicy;
  if (!policy) return "allow";

  const channel = firstNonEmpty(
    ctx.channel,
    ctx.entry?.channel,
    ctx.entry?.lastChannel,
    channelFromKey(ctx.sessionKey),
  )?.toLowerCase();
  const chatType = normalizeChatType(firstNonEmpty(ctx.chatType, ctx.entry?.chatType, chatTypeFromKey(ctx.sessionKey)));
  const raw = ctx.sessionKey.trim().toLowerCase();
  const stripped = stripAgentPrefix(raw);

  let allowed = false;
  for (const rule of policy.rules) {
    const match = rule.match ?? {};
    if (match.channel !== undefined && match.channel.trim().toLowerCase() !== channel) continue;
    if (match.chatType !== undefined && normalizeChatType(match.chatType) !== chatType) continue;
    if (match.rawKeyPrefix !== undefined && !startsWithAny(raw, prefixVariants(match.rawKeyPrefix))) continue;
    if (match.keyPrefix !== undefined) {
      const variants = prefixVariants(match.keyPrefix);
      if (!startsWithAny(raw, variants) && !startsWithAny(stripped, variants)) continue;
    }
    if (rule.action === "deny") return "deny";
    allowed = true;
  }
  return allowed ? "allow" : (policy.default ?? "allow");
}
