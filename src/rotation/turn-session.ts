/**
 * The session a turn accepted without a chat message runs in (the `agent` RPC, a
 * `sessions_send` target, the OpenAI door), as OpenClaw's agent command resolves it: a session
 * gone stale under its reset policy (daily / idle) is rolled over first, and the turn counts as
 * activity (updatedAt and the stale clock move). Without this such sessions never reset, and
 * `session.maintenance` pruned them as idle while they were in daily use.
 *
 * The activity is written at most once a minute per session (a tenth of a shorter idle window),
 * so a busy session costs no write per turn: its updatedAt may lag its last turn by that much. The stale
 * instant of an entry is computed once per cached entry object (the gateway's entry cache hands
 * out the same object for the same stored text), so a fresh session costs a lookup.
 */
import { randomUUID } from "node:crypto";
import type { SessionEntry } from "../session/session-entry.js";
import { entryStaleAt, freshnessOf, staleAtFor } from "../session/entry-freshness.js";
import { identOf } from "../session/session-ident.js";
import { enqueueArchive, resetPatch, type RotationDeps } from "./rotate.js";

/** How stale a session's updatedAt may get before a turn writes its activity (at most). */
export const TURN_ACTIVITY_EVERY_MS = 60_000;

/**
 * The activity lag allowed for `entry`: a minute, but never more than a tenth of the time from
 * its updatedAt to its stale instant. updatedAt may lag the last turn by this much, so an idle
 * reset can come this much early; a tenth keeps that to the last 10% of the window (6 s of
 * `idleMinutes: 1`, where a flat minute reset sessions in use every 10 s).
 */
export function activityEveryMs(entry: SessionEntry, staleAt: number | null): number {
  if (staleAt === null) return TURN_ACTIVITY_EVERY_MS;
  return Math.min(TURN_ACTIVITY_EVERY_MS, Math.max(0, (staleAt - entry.updatedAt) / 10));
}
const MAX_RACES = 5;

const staleAtOf = new WeakMap<SessionEntry, number | null>();

/** `entryStaleAt` of `entry`, computed once per entry object (a turn's begin and finish see the same one). */
export function cachedStaleAt(config: RotationDeps["config"], entry: SessionEntry): number | null {
  let at = staleAtOf.get(entry);
  if (at === undefined) {
    at = entryStaleAt(config, entry);
    staleAtOf.set(entry, at);
  }
  return at;
}

/**
 * `entry` itself when it is fresh and its activity recent (no I/O); otherwise the entry after
 * the rollover or the activity write. A session deleted meanwhile is returned as it was read: the
 * push, checked on its sessionId, then refuses it, and the door creates the session again
 * (src/runs/enqueue.ts), so the turn never runs in the deleted sessionId.
 */
export async function sessionForTurn(svc: RotationDeps, entry: SessionEntry, now = Date.now()): Promise<SessionEntry> {
  let current = entry;
  for (let attempt = 1; attempt <= MAX_RACES; attempt++) {
    const staleAt = cachedStaleAt(svc.config, current);
    const stale = staleAt !== null && now >= staleAt;
    if (!stale && now - current.updatedAt < activityEveryMs(current, staleAt)) return current;
    const ident = identOf(svc.config, current.key);
    const reason = stale ? (freshnessOf(svc.config, current, now).staleReason ?? "daily") : undefined;
    try {
      const next = await svc.sessions.upsert(
        current.key,
        ident,
        reason ? { ...resetPatch(current, randomUUID(), reason), resetAt: null } : {},
        {
          mode: "update",
          expectSessionId: current.sessionId,
          activity: "touch",
          now,
          staleAt: staleAtFor(svc.config, current.key, now, current.channel),
          archiveRetired: reason !== undefined,
        },
      );
      if (reason)
        await enqueueArchive(svc, {
          sessionKey: current.key,
          agentId: ident.agentId,
          sessionId: current.sessionId,
          kind: "reset",
        });
      return next;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === "session_not_found") return current;
      if (code !== "session_conflict") throw err;
      // Rotated meanwhile (a message, the sweep, another gateway): decide again on the new entry.
      current = (await svc.sessions.get(current.key)) ?? current;
    }
  }
  return current;
}
