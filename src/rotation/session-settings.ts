/**
 * The one way to write what a rollover clears (overrides, label, send policy, counters and run
 * state: `CLEARED_BY_STALE_ROLLOVER`, `CLEARED_ON_RESET`) without counting it as activity:
 * `sessions.patch`, `/send`, `/stop`, the `session_status` tool, a sub-agent's new session and a
 * turn's bookkeeping. (An import does not index what it writes: docs/concepts/openclaw-import.md.)
 *
 * A session untouched since its reset that holds nothing a rollover clears is fresh and out of
 * the stale index (src/session/entry-freshness.ts). A write that gives it something to clear
 * must put it back, due one policy period after the reset: otherwise the sweep never finds it,
 * and the setting outlives its idle/daily expiry until the next message (which does clear it).
 * So the write carries the stale instant of the entry as it leaves it.
 */
import type { Config } from "../config/schema.js";
import { entryStaleAt, withPatch } from "../session/entry-freshness.js";
import type { SessionEntry, SessionEntryPatch } from "../session/session-entry.js";
import { identOf } from "../session/session-ident.js";
import type { SessionStore, UpsertOptions } from "../storage/session-store.js";

export interface SettingsWriteOptions {
  /** The entry as the caller read it (null: none), to save a read; read here when left out. */
  before?: SessionEntry | null;
  /**
   * "update" (the default) fails on a missing session; "upsert" creates it and "create" only
   * creates it (the patch carries a sessionId then).
   */
  mode?: "update" | "upsert" | "create";
  now?: number;
  expectSessionId?: string;
  increment?: UpsertOptions["increment"];
}

export async function writeSessionSettings(
  svc: { config: Config; sessions: SessionStore },
  sessionKey: string,
  patch: SessionEntryPatch,
  opts: SettingsWriteOptions = {},
): Promise<SessionEntry> {
  const now = opts.now ?? Date.now();
  const before = opts.before !== undefined ? opts.before : await svc.sessions.get(sessionKey);
  const staleAt = entryStaleAt(svc.config, entryAfter(before, sessionKey, patch, opts.increment, now));
  // The index already holds the entry's instant (every write that moves it writes it): a write
  // that leaves it where it was leaves the index alone, and with it a busy session's later look
  // (src/workers/maintenance.ts, SWEEP_BUSY_RETRY_MS).
  const moved = staleAt !== null && (before === null || staleAt !== entryStaleAt(svc.config, before));
  return await svc.sessions.upsert(sessionKey, identOf(svc.config, sessionKey), patch, {
    activity: "preserve",
    now,
    mode: opts.mode ?? "update",
    ...(opts.expectSessionId !== undefined ? { expectSessionId: opts.expectSessionId } : {}),
    ...(opts.increment ? { increment: opts.increment } : {}),
    // Set, never cleared here. `before` may be out of date, but activity and resets only move
    // forward, so an instant computed from it is at most early: the sweep then finds the session
    // fresh and indexes its real instant. "Nothing to reset" (null) could be wrong the other way
    // (a concurrent write gave it something): the index is left as it is, and the sweep drops
    // the session when it comes due and has nothing to reset.
    ...(moved ? { staleAt } : {}),
  });
}

/** The entry as the upsert (preserving activity) leaves it, for the fields freshness reads. */
function entryAfter(
  before: SessionEntry | null,
  sessionKey: string,
  patch: SessionEntryPatch,
  increment: UpsertOptions["increment"],
  now: number,
): SessionEntry {
  // A new entry's activity is its creation (session-upsert.lua sets updatedAt to now).
  const base = before ?? ({ key: sessionKey, updatedAt: now } as SessionEntry);
  const out = withPatch(base, patch as Record<string, unknown>) as unknown as Record<string, unknown>;
  for (const [field, delta] of Object.entries(increment ?? {})) out[field] = Number(out[field] ?? 0) + (delta ?? 0);
  return out as unknown as SessionEntry;
}
