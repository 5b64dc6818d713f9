/**
 * Freshness of a stored session under the configured reset policy: the same pure functions
 * serve the lazy check on the next message and the scheduled sweep.
 */
import type { Config } from "../config/schema.js";
import { evaluateFreshness, staleAt, type Freshness } from "../session/freshness.js";
import { isThreadSessionKey } from "../session/key-classify.js";
import { resolveResetPolicy, type ResetPolicy } from "../session/reset-policy.js";
import type { SessionEntry } from "../storage/session-entry.js";

export function policyFor(config: Config, sessionKey: string, channel?: string): ResetPolicy {
  return resolveResetPolicy(config, { sessionKey, ...(channel ? { channel } : {}), isThread: isThreadSessionKey(sessionKey) });
}

export function freshnessOf(config: Config, entry: SessionEntry, now: number): Freshness {
  return evaluateFreshness({ updatedAt: entry.updatedAt, now, policy: policyFor(config, entry.key, entry.channel) });
}

/** When a session last active at `updatedAt` goes stale (null: never), for the stale index. */
export function staleAtFor(config: Config, sessionKey: string, updatedAt: number, channel?: string): number | null {
  return staleAt({ updatedAt, policy: policyFor(config, sessionKey, channel) }) ?? null;
}
