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

/** Started by a sweep or `sessions.reset` and no message since: nothing to reset yet. */
export function untouchedSinceReset(entry: SessionEntry): boolean {
  return entry.resetAt !== undefined && entry.resetAt >= entry.updatedAt;
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
  if (untouchedSinceReset(entry)) return { fresh: true };
  return evaluateFreshness({ updatedAt: entry.updatedAt, now, policy: policyFor(config, entry.key, channel) });
}

/** When a session last active at `updatedAt` goes stale (null: never), for the stale index. */
export function staleAtFor(config: Config, sessionKey: string, updatedAt: number, channel?: string): number | null {
  return staleAt({ updatedAt, policy: policyFor(config, sessionKey, channel) }) ?? null;
}

/** The stale-index instant of a stored entry: never while it is untouched since a reset. */
export function entryStaleAt(config: Config, entry: SessionEntry): number | null {
  return untouchedSinceReset(entry) ? null : staleAtFor(config, entry.key, entry.updatedAt, entry.channel);
}
