/**
 * Starting a new session for a key (reset trigger, stale daily/idle, `sessions.reset`):
 * a new sessionId by compare-and-set, counters cleared, toggles and lineage kept. The old
 * transcript is archived as `.reset.<ts>` either by the turn that caused the reset (in session
 * order) or by a maintenance job that waits for the session lease.
 */
import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { SessionStore } from "../storage/session-store.js";
import type { SessionEntry, SessionEntryPatch } from "../session/session-entry.js";
import { identOf } from "../session/session-ident.js";
import { CLEARED_BY_STALE_ROLLOVER, CLEARED_ON_RESET, entryStaleAt } from "../session/entry-freshness.js";
import { addJob, type ArchiveJobData } from "../queues/jobs.js";
import type { Turn } from "../runs/turn.js";

/**
 * What a new session keeps depends on how it started (docs/concepts/session-reset.md):
 * - `operator` (`sessions.reset`): only counters and run state are cleared; toggles, sendPolicy,
 *   label, model override and lineage stay.
 * - `explicit` (`/new`, `/reset` in a chat): the chat's toggles (model, thinking, label, name)
 *   carry over; sendPolicy does not (it is cleared on any chat-started new session).
 * - `stale` (daily/idle rollover, by message or sweep): nothing the user set carries over.
 * Lineage (spawnedBy, parent, depth, role) is immutable and always kept.
 */
export type ResetKind = "operator" | "explicit" | "stale";

const CLEARED_BY_KIND: Record<ResetKind, readonly (keyof SessionEntry)[]> = {
  operator: [],
  explicit: ["sendPolicy"],
  stale: CLEARED_BY_STALE_ROLLOVER,
};

export function resetPatch(
  old: SessionEntry,
  newSessionId: string,
  reason: string,
  kind: ResetKind = resetKindOf(reason),
): SessionEntryPatch {
  const patch: SessionEntryPatch = { sessionId: newSessionId, previousSessionId: old.sessionId, resetReason: reason };
  for (const f of [...CLEARED_ON_RESET, ...CLEARED_BY_KIND[kind]]) (patch as Record<string, unknown>)[f] = null;
  return patch;
}

/** Rotations without a chat message: `daily`/`idle` are stale rollovers, anything else an operator's reset. */
export function resetKindOf(reason: string): ResetKind {
  return reason === "daily" || reason === "idle" ? "stale" : "operator";
}

export type { ArchiveJobData } from "../queues/jobs.js";

/** What rotating a session touches: the config (key identity, stale clock), the store, the archive queue. */
export interface RotationDeps {
  config: Config;
  sessions: SessionStore;
  queues: Queues;
}

export async function enqueueArchive(
  svc: Pick<RotationDeps, "queues" | "config">,
  data: ArchiveJobData,
): Promise<void> {
  await addJob(svc, "archive", data);
}

/**
 * Delete a session; with `archive`, its transcript is archived as `deleted`: recorded as pending
 * in the delete itself (src/rotation/pending-archives.ts), then queued. The archive job waits for
 * the session lease like any archive. Returns the deleted entry (null: there was none).
 */
export async function deleteSession(
  svc: Pick<RotationDeps, "sessions" | "queues" | "config">,
  sessionKey: string,
  ident: { agentId: string; kind: SessionEntry["kind"] },
  opts: { archive: boolean },
): Promise<SessionEntry | null> {
  const old = await svc.sessions.delete(sessionKey, ident.agentId, ident.kind, opts);
  if (old && opts.archive)
    await enqueueArchive(svc, { sessionKey, agentId: ident.agentId, sessionId: old.sessionId, kind: "deleted" });
  return old;
}

/**
 * The archive a turn carried (its reset's retired transcript), for a turn that ends without
 * running (stopped, given up): the job's id is derived, so a turn that did archive adds nothing.
 */
export async function enqueueArchiveOf(svc: Pick<RotationDeps, "queues" | "config">, turn: Turn): Promise<void> {
  if (!turn.archive) return;
  await enqueueArchive(svc, {
    sessionKey: turn.sessionKey,
    agentId: turn.agentId,
    sessionId: turn.archive.sessionId,
    kind: turn.archive.kind,
  });
}

/**
 * Rotate `old` to a new sessionId unless someone else already did (returns null then).
 * `archive: "job"` queues the archive; `"caller"` leaves it to the caller's turn.
 *
 * This is a rotation without a message (sweep, `sessions.reset`): the new session is marked
 * `resetAt`, and its idle/daily clock runs from that instant (a reset is activity, as in
 * OpenClaw), so neither the next sweep nor the lazy check on the next message rotates it again
 * for the boundary it was reset at. It is indexed stale one policy period after the reset, or
 * not at all when it holds nothing a rollover clears (src/session/entry-freshness.ts).
 */
export async function rotateSession(
  svc: RotationDeps,
  old: SessionEntry,
  opts: {
    reason: string;
    now?: number;
    activity?: "touch" | "preserve";
    archive: "job" | "caller";
    extra?: SessionEntryPatch;
    /** Sweeps: rotate only if nothing changed since `old` was read and no turn is queued or running. */
    onlyIfUntouchedAndIdle?: boolean;
    /** The new sessionId (derived by a caller that may repeat this rotation); a new UUID otherwise. */
    newSessionId?: string;
  },
): Promise<SessionEntry | null> {
  const now = opts.now ?? Date.now();
  const ident = identOf(svc.config, old.key);
  const newSessionId = opts.newSessionId ?? randomUUID();
  const activity = opts.activity ?? "touch";
  const patch: SessionEntryPatch = {
    ...resetPatch(old, newSessionId, opts.reason),
    resetAt: now,
    ...(opts.extra ?? {}),
  };
  let next: SessionEntry;
  try {
    next = await svc.sessions.upsert(old.key, ident, patch, {
      expectSessionId: old.sessionId,
      // Recorded with the rotation, so a crash before the job is queued loses no archive.
      archiveRetired: opts.archive === "job",
      ...(opts.onlyIfUntouchedAndIdle ? { expectRev: old.rev, requireIdle: true } : {}),
      activity,
      now,
      // The stale instant of the entry this write makes, written with it.
      staleAt: entryStaleAt(svc.config, patched(old, patch, activity, now)),
    });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "session_conflict" || code === "session_busy") return null;
    throw err;
  }
  if (opts.archive === "job")
    await enqueueArchive(svc, { sessionKey: old.key, agentId: ident.agentId, sessionId: old.sessionId, kind: "reset" });
  return next;
}

/**
 * `old` as the upsert leaves it (session-upsert.lua), for the fields freshness reads: the patch's
 * fields set (null removes one) and updatedAt moved as the activity mode says.
 */
function patched(
  old: SessionEntry,
  patch: SessionEntryPatch,
  activity: "touch" | "preserve",
  now: number,
): SessionEntry {
  const out: Record<string, unknown> = { ...old };
  for (const [k, v] of Object.entries(patch)) out[k] = v === null ? undefined : v;
  const patchUpdated = typeof patch.updatedAt === "number" ? patch.updatedAt : 0;
  out.updatedAt = Math.max(old.updatedAt, patchUpdated, activity === "touch" ? now : 0);
  return out as unknown as SessionEntry;
}
