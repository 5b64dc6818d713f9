/**
 * Which reset policy applies to a session (docs/concepts/sessions.md, "Reset policy"). Pure: no I/O.
 *
 * Precedence, as OpenClaw's `resolveSessionResetPolicy`:
 * - `session.resetByChannel[<channel>]` replaces everything for that channel: `reset`,
 *   `resetByType` and the legacy top-level `idleMinutes` are all ignored (not merged).
 * - otherwise `session.resetByType[<type>]` wins over `session.reset` field by field.
 * - legacy `session.idleMinutes` with neither `reset` nor `resetByType` ⇒ idle-only mode;
 *   with either present it still applies as an extra idle expiry.
 * - no setting at all ⇒ daily at 04:00.
 * - `mode: "off"` (a Switchboard addition) ⇒ never reset by time; idle is ignored too.
 *
 * The time zone of the daily boundary: the chosen policy's `timezone` › `session.reset.timezone`
 * › the host's. (`session.reset.timezone` is a deployment setting, so it also backs a
 * `resetByChannel` entry that names no zone of its own.)
 */
import type { Config, ResetPolicyConfig } from "../config/index.js";
import { isThreadSessionKey } from "./key-classify.js";

export type ResetMode = "daily" | "idle" | "off";

/** The effective policy for one session. `atHour`/`timezone` only in daily mode. */
export interface ResetPolicy {
  mode: ResetMode;
  /** 0..23, local hour of the daily boundary (daily mode only). */
  atHour?: number;
  /** Minutes of inactivity after which the session expires; 0 or absent = never. */
  idleMinutes?: number;
  /** IANA zone of the daily boundary (daily mode only). */
  timezone?: string;
}

/** Switchboard's names for OpenClaw's reset types (`direct` is called `dm` here). */
export type ResetType = "dm" | "group" | "thread";

export interface ResetPolicyContext {
  sessionKey: string;
  /** Channel of the inbound message; derived from the key when absent. */
  channel?: string;
  /** True when the inbound message is in a thread even though the key has no thread suffix. */
  isThread?: boolean;
}

export const DEFAULT_RESET_AT_HOUR = 4;
/** OpenClaw B-APR: idle mode without idleMinutes never expires by inactivity. */
export const DEFAULT_IDLE_MINUTES = 0;

/** The host zone as last resolved, and the `TZ` it was resolved under. */
let hostZone: { tz: string | undefined; zone: string } | undefined;

/**
 * The host's IANA time zone (falls back to UTC when the runtime reports none). Resolved once and
 * again only when `TZ` changes (Node applies a new `TZ` at once): asking Intl builds a
 * DateTimeFormat, about 35 µs, and a daily policy with no `timezone` (the default) resolves the
 * zone for every freshness check, several per turn.
 */
export function hostTimeZone(): string {
  const tz = process.env.TZ;
  if (hostZone === undefined || hostZone.tz !== tz)
    hostZone = { tz, zone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" };
  return hostZone.zone;
}

/** Effective reset policy for the session in `ctx`. */
export function resolveResetPolicy(config: Config, ctx: ResetPolicyContext): ResetPolicy {
  const session = config.session;
  const resetType = resolveResetType(ctx);
  const channel = resolveResetChannel(ctx);
  const override = channel ? findChannelOverride(session.resetByChannel, channel) : undefined;

  const base: ResetPolicyConfig | undefined = override ?? session.reset;
  const typeReset: ResetPolicyConfig | undefined = override ? undefined : pickTypeReset(session.resetByType, resetType);
  const hasExplicitReset = Boolean(base || session.resetByType);
  const legacyIdle = override ? undefined : session.idleMinutes;

  const mode: ResetMode = typeReset?.mode ?? base?.mode ?? (!hasExplicitReset && legacyIdle != null ? "idle" : "daily");
  if (mode === "off") return { mode: "off" };

  const idleRaw = typeReset?.idleMinutes ?? base?.idleMinutes ?? legacyIdle;
  const idleMinutes =
    idleRaw != null && Number.isFinite(idleRaw)
      ? Math.max(0, Math.floor(idleRaw))
      : mode === "idle"
        ? DEFAULT_IDLE_MINUTES
        : undefined;

  if (mode === "idle") return { mode, idleMinutes: idleMinutes ?? DEFAULT_IDLE_MINUTES };

  const policy: ResetPolicy = {
    mode,
    atHour: clampHour(typeReset?.atHour ?? base?.atHour),
    timezone: typeReset?.timezone ?? base?.timezone ?? session.reset?.timezone ?? hostTimeZone(),
  };
  if (idleMinutes !== undefined) policy.idleMinutes = idleMinutes;
  return policy;
}

/**
 * Reset type from the context and key shape (docs/concepts/sessions.md, "Reset policy"): cron and webhook sessions are
 * always `dm`; then `thread` (caller says so, or the key is a thread by `isThreadSessionKey`: a
 * `:thread:<id>` suffix, or a Telegram forum topic); then `group` (`:group:`/`:channel:` chat
 * kind); else `dm`. A `:topic:` segment alone is no thread: Feishu group ids embed `:topic:`
 * (OpenClaw resolves topics per channel plugin, and only Telegram's are threads).
 */
export function resolveResetType(ctx: { sessionKey: string; isThread?: boolean }): ResetType {
  const rest = keyRest(ctx.sessionKey);
  if (rest.length > 0 && (rest[0] === "cron" || rest[0] === "hook")) return "dm";
  if (ctx.isThread) return "thread";
  if (isThreadSessionKey(ctx.sessionKey)) return "thread";
  return chatKindOf(rest) === "group" ? "group" : "dm";
}

/**
 * Channel used to look up `resetByChannel`: `ctx.channel` (lowercased), else the key's channel
 * segment for `agent:<a>:<channel>:(group|channel|dm):…` and
 * `agent:<a>:<channel>:<account>:dm:…`; else undefined (main, per-peer, cron, hook, sub-agent keys).
 */
export function resolveResetChannel(ctx: { sessionKey: string; channel?: string }): string | undefined {
  const explicit = ctx.channel?.trim().toLowerCase();
  if (explicit) return explicit;
  const rest = keyRest(ctx.sessionKey);
  const first = rest[0];
  if (!first || NON_CHANNEL_HEADS.has(first) || CHAT_KINDS.has(first)) return undefined;
  if (rest.length >= 3 && CHAT_KINDS.has(rest[1] ?? "")) return first;
  if (rest.length >= 4 && DM_KINDS.has(rest[2] ?? "")) return first;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// private helpers: a small, self-contained look at the key's shape

const GROUP_KINDS = new Set(["group", "channel"]);
const DM_KINDS = new Set(["dm", "direct"]);
const CHAT_KINDS = new Set([...GROUP_KINDS, ...DM_KINDS]);
const NON_CHANNEL_HEADS = new Set(["cron", "hook", "subagent"]);

/** Lowercased segments after an `agent:<id>:` prefix (the whole key when it has none). */
function keyRest(sessionKey: string): string[] {
  const tokens = sessionKey.trim().toLowerCase().split(":");
  if (tokens[0] === "agent" && tokens.length >= 3) return tokens.slice(2);
  return tokens;
}

/** The first chat-kind segment that is followed by an id decides; none ⇒ dm. */
function chatKindOf(rest: string[]): "group" | "dm" {
  for (let i = 0; i < rest.length - 1; i++) {
    const t = rest[i] ?? "";
    if (GROUP_KINDS.has(t)) return "group";
    if (DM_KINDS.has(t)) return "dm";
  }
  return "dm";
}

function findChannelOverride(
  byChannel: Record<string, ResetPolicyConfig> | undefined,
  channel: string,
): ResetPolicyConfig | undefined {
  if (!byChannel) return undefined;
  const exact = byChannel[channel];
  if (exact) return exact;
  for (const [name, policy] of Object.entries(byChannel)) {
    if (name.trim().toLowerCase() === channel) return policy;
  }
  return undefined;
}

/** `dm` and `direct` are the same type; when both are configured `dm` (our canonical name) wins. */
function pickTypeReset(byType: Config["session"]["resetByType"], type: ResetType): ResetPolicyConfig | undefined {
  if (!byType) return undefined;
  if (type === "dm") return byType.dm ?? byType.direct;
  return byType[type];
}

function clampHour(raw: unknown): number {
  if (typeof raw !== "number" || !Number.isFinite(raw)) return DEFAULT_RESET_AT_HOUR;
  return Math.min(23, Math.max(0, Math.floor(raw)));
}
