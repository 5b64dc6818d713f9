/**
 * Resolving what an agent passes as `sessionKey` (docs/concepts/sessions.md, "Keys and sessionIds in tool input"):
 * `current` is the caller,
 * `main` the caller agent's main session, a stored key wins, then a sessionId (UUID or other
 * id-like input) is looked up in the sessionId index.
 */
import type { ToolDeps } from "./tool-deps.js";
import { canonicalSessionKey, resolveToolSessionRef } from "../session/key-canonical.js";
import { looksLikeSessionId, shouldResolveSessionIdInput } from "../session/session-id.js";
import { mayFind, restrictedToSpawned } from "./access.js";
import type { ToolCaller } from "./tool-context.js";
import type { SessionEntry } from "../session/session-entry.js";

/** A resolved key comes with its entry when the resolution read it (the caller need not read it again). */
export type RefResolution =
  | { ok: true; key: string; entry?: SessionEntry }
  | { ok: false; status: "error" | "forbidden"; error: string };

export async function resolveSessionRef(svc: ToolDeps, caller: ToolCaller, input: string): Promise<RefResolution> {
  const raw = input.trim();
  if (
    raw === "current" &&
    !(await svc.sessions.get(canonicalSessionKey(svc.config, "current", { agentId: caller.agentId })))
  ) {
    return { ok: true, key: caller.sessionKey };
  }
  // A sandboxed caller is not told whether a session it cannot see exists.
  const notFound = (): RefResolution =>
    restrictedToSpawned(svc, caller)
      ? { ok: false, status: "forbidden", error: `Session not visible from this sandboxed agent session: ${raw}` }
      : { ok: false, status: "error", error: `Session not found: ${raw} (use the full sessionKey from sessions_list)` };
  let key: string;
  try {
    key = resolveToolSessionRef(svc.config, raw, { requesterKey: caller.sessionKey });
  } catch (err) {
    if (!looksLikeSessionId(raw)) return { ok: false, status: "error", error: (err as Error).message };
    key = "";
  }
  const entry = key ? await svc.sessions.get(key) : null;
  if (entry) return { ok: true, key, entry };
  if (shouldResolveSessionIdInput(raw)) {
    const byId = await svc.sessions.keyForSessionId(raw);
    // A session the sandboxed caller may not see is not found by its sessionId either.
    if (byId && (await mayFind(svc, caller, byId))) return { ok: true, key: byId };
    // Not key-shaped and no such sessionId: an error, never a new session under a made-up key
    // (`random-slug` became `agent:main:random-slug`, and a send created it and ran a turn).
    return notFound();
  }
  if (!key) return notFound();
  return { ok: true, key };
}
