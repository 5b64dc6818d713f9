/**
 * Freshness of a stored session under the configured reset policy: the same pure functions
 * serve the lazy check on the next message and the scheduled sweep.
 */
import type { Config } from "../config/schema.js";
import { evaluateFreshness, staleAt, type Freshness } from "./freshness.js";
import { isThreadSessionKey } from "./key-classify.js";
import { resolveResetPolicy, type ResetPolicy } from "./reset-policy.js";
import type { SessionEntry } from "./session-entry.js";

export function policyFor(config: Config, sessionKey: string, channel?: string): ResetPolicy {
  return resolveResetPolicy(config, {
    sessionKey,
    ...(channel ? { channel } : {}),
    isThread: isThreadSessionKey(sessionKey),
  });
}

/** Counters and run state: cleared on every new session (src/rotation/rotate.ts `resetPatch`). */
export const CLEARED_ON_RESET: readonly (keyof SessionEntry)[] = [
  "inputTokens",
  "outputTokens",
  "totalTokens",
  "contextTokens",
  "systemSent",
  "abortedLastRun",
  "status",
  "startedAt",
  "endedAt",
  "runtimeMs",
];

/**
 * What a daily/idle rollover clears besides: nothing the user set carries over
 * (docs/concepts/session-reset.md). Defined here, not in rotate.ts, because freshness needs it
 * too: an untouched session holding none of it has nothing a rollover could reset.
 */
export const CLEARED_BY_STALE_ROLLOVER: readonly (keyof SessionEntry)[] = [
  "sendPolicy",
  "modelOverride",
  "providerOverride",
  "thinkingLevel",
  "verboseLevel",
  "label",
  "displayName",
];

/** Started by a rotation without a message (sweep, `sessions.reset`, isolated run) and no message since. */
function untouchedSinceReset(entry: SessionEntry): boolean {
  return entry.resetAt !== undefined && entry.resetAt >= entry.updatedAt;
}

/**
 * The instant the policy's idle/daily clock runs from. A reset counts as activity, as OpenClaw's
 * `sessions.reset` writes with touch-activity: a session reset and left alone goes stale one
 * policy period after its reset, not never (overrides set after the reset then expire with it).
 * Not the written updatedAt alone: a sweep's rollover leaves it (pruning and `sessions.list`
 * order read it, and nobody used the session), while `sessions.reset` moves it too.
 */
export function lastActivityOf(entry: SessionEntry): number {
  return Math.max(entry.updatedAt, entry.resetAt ?? entry.updatedAt);
}

/**
 * Untouched since its reset and holding nothing a rollover clears (no counters, no override; a
 * mute is kept by the sweep's rollover, so it does not count): rotating it again would only
 * change its sessionId. Such a session is fresh and left out of the stale index, so a session
 * the sweep rolled over is not rolled over again every period while nobody uses it, and each
 * reset boundary rotates a session once (the sweep's rotation and the lazy check on the next
 * message see the same reset instant).
 */
function nothingToReset(entry: SessionEntry): boolean {
  if (!untouchedSinceReset(entry)) return false;
  for (const field of [...CLEARED_ON_RESET, ...CLEARED_BY_STALE_ROLLOVER]) {
    const v = entry[field];
    if (v === undefined || v === null || v === false || v === 0 || v === "") continue;
    if (field === "sendPolicy" && v === "deny") continue;
    return false;
  }
  return true;
}

/**
 * `channel` picks the `resetByChannel` policy. An arriving message passes its own channel (as
 * OpenClaw does); the sweep, which has no message, uses the channel the entry last saw.
 */
export function freshnessOf(
  config: Config,
  entry: SessionEntry,
  now: number,
  channel: string | undefined = entry.channel,
): Freshness {
  if (nothingToReset(entry)) return { fresh: true };
  return evaluateFreshness({ updatedAt: lastActivityOf(entry), now, policy: policyFor(config, entry.key, channel) });
}

/** When a session last active at `updatedAt` goes stale (null: never), for the stale index. */
export function staleAtFor(config: Config, sessionKey: string, updatedAt: number, channel?: string): number | null {
  return staleAt({ updatedAt, policy: policyFor(config, sessionKey, channel) }) ?? null;
}

/**
 * The stale-index instant of a stored entry, agreeing with `freshnessOf`: counted from its reset
 * while untouched since, never while there is nothing to reset.
 */
export function entryStaleAt(config: Config, entry: SessionEntry): number | null {
  return nothingToReset(entry) ? null : staleAtFor(config, entry.key, lastActivityOf(entry), entry.channel);
}

/**
 * `entry` as a patch will leave it (a `null` field removed), to compute its stale instant before
 * the write that sets it (e.g. an override on a session untouched since its reset).
 */
export function withPatch(entry: SessionEntry, patch: Record<string, unknown>): SessionEntry {
  const out: Record<string, unknown> = { ...entry };
  for (const [field, value] of Object.entries(patch)) {
    if (value === null) delete out[field];
    else if (value !== undefined) out[field] = value;
  }
  return out as unknown as SessionEntry;
}
