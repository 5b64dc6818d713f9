/**
 * Isolated runs (OpenClaw cron `sessionTarget: "isolated"`): every run starts in a fresh
 * sessionId under the same key, so runs never see each other's context. The previous run's
 * transcript stays where it is (it is that run's record); the session's own overrides (model,
 * thinking, sendPolicy, label) are kept, while the delivery route of the previous run is not.
 */
import type { SessionEntry } from "../session/session-entry.js";
import { rotateSession, type RotationDeps } from "./rotate.js";

const MAX_RACES = 5;

export async function freshRunSession(svc: RotationDeps, entry: SessionEntry): Promise<SessionEntry> {
  let current = entry;
  for (let attempt = 0; attempt < MAX_RACES; attempt++) {
    const next = await rotateSession(svc, current, {
      reason: "isolated",
      archive: "caller", // and the caller archives nothing: the old transcript is the old run's
      extra: { deliveryContext: null, lastChannel: null, lastTo: null, lastAccountId: null, lastThreadId: null },
    });
    if (next) return next;
    current = (await svc.sessions.get(entry.key)) ?? current; // someone rotated meanwhile: again, on theirs
  }
  throw new Error(`could not start an isolated run session for ${entry.key}`);
}
