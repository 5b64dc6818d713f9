import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import type { SessionEntry } from "../session/session-entry.js";
import { staleAtFor } from "../session/entry-freshness.js";
import { identOf } from "../session/session-ident.js";
import type { SessionStore } from "./session-store.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { SendBlockedError } from "../errors/index.js";

/** The session's entry, created (once, even under concurrent callers) if it never existed. */
export async function ensureSession(
  svc: { config: Config; sessions: SessionStore },
  sessionKey: string,
  extra: Partial<SessionEntry> = {},
): Promise<SessionEntry> {
  const existing = await svc.sessions.get(sessionKey);
  if (existing) return existing;
  try {
    const now = Date.now();
    return await svc.sessions.upsert(
      sessionKey,
      identOf(svc.config, sessionKey),
      { sessionId: randomUUID(), ...extra },
      // On the stale clock from its creation: its first turn's activity write is skipped (it
      // is recent, src/rotation/turn-session.ts), and the sweep must find it all the same.
      { mode: "create", now, staleAt: staleAtFor(svc.config, sessionKey, now, extra.channel) },
    );
  } catch (err) {
    if ((err as { code?: string }).code === "session_exists") return (await svc.sessions.get(sessionKey))!;
    throw err;
  }
}

/**
 * The session a door's send goes to, created if it does not exist yet, under its send policy:
 * checked on `current` (null: none yet, the config's rules on the key alone) before anything is
 * created, so a refused send leaves nothing behind, and again on an entry created meanwhile by a
 * concurrent caller (perhaps with an override of its own). Throws SendBlockedError.
 */
export async function ensureSessionForSend(
  svc: { config: Config; sessions: SessionStore },
  sessionKey: string,
  current: SessionEntry | null,
): Promise<SessionEntry> {
  if (sessionSendPolicy(svc.config, sessionKey, current) === "deny") throw new SendBlockedError(sessionKey);
  if (current) return current;
  const created = await ensureSession(svc, sessionKey);
  if (sessionSendPolicy(svc.config, sessionKey, created) === "deny") throw new SendBlockedError(sessionKey);
  return created;
}
