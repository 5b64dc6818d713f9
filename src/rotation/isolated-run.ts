/**
 * Isolated runs (OpenClaw cron `sessionTarget: "isolated"`): every run starts in a fresh
 * sessionId under the same key, so runs never see each other's context. The previous run's
 * transcript stays where it is (it is that run's record); the session's own overrides (model,
 * thinking, sendPolicy, label) are kept, while the delivery route of the previous run is not.
 */
import type { SessionEntry } from "../session/session-entry.js";
import { rotateSession, type RotationDeps } from "./rotate.js";

const MAX_RACES = 5;

/**
 * `sessionId`: the new run's sessionId when the caller derives it (an idempotency key): a call
 * repeated, also concurrently, finds the session already at it and rotates nothing more, so the
 * run and the session it answers with stay one.
 */
export async function freshRunSession(
  svc: RotationDeps,
  entry: SessionEntry,
  sessionId?: string,
): Promise<SessionEntry> {
  let current = entry;
  for (let attempt = 0; attempt < MAX_RACES; attempt++) {
    if (sessionId !== undefined && current.sessionId === sessionId) return current;
    const next = await rotateSession(svc, current, {
      reason: "isolated",
      archive: "caller", // and the caller archives nothing: the old transcript is the old run's
      extra: { deliveryContext: null, lastChannel: null, lastTo: null, lastAccountId: null, lastThreadId: null },
      ...(sessionId !== undefined ? { newSessionId: sessionId } : {}),
    });
    if (next) return next;
    current = (await svc.sessions.get(entry.key)) ?? current; // someone rotated meanwhile: again, on theirs
  }
  throw new Error(`could not start an isolated run session for ${entry.key}`);
}
