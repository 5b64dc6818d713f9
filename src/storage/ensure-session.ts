import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import type { SessionEntry } from "../session/session-entry.js";
import { identOf } from "../session/session-ident.js";
import type { SessionStore } from "./session-store.js";

/** The session's entry, created (once, even under concurrent callers) if it never existed. */
export async function ensureSession(
  svc: { config: Config; sessions: SessionStore },
  sessionKey: string,
  extra: Partial<SessionEntry> = {},
): Promise<SessionEntry> {
  const existing = await svc.sessions.get(sessionKey);
  if (existing) return existing;
  try {
    return await svc.sessions.upsert(
      sessionKey,
      identOf(svc.config, sessionKey),
      { sessionId: randomUUID(), ...extra },
      { mode: "create" },
    );
  } catch (err) {
    if ((err as { code?: string }).code === "session_exists") return (await svc.sessions.get(sessionKey))!;
    throw err;
  }
}
