/**
 * `/stop` (and `subagents kill`): abort the session's running turn wherever it runs, drop its
 * queued turns (their records become `killed`, waiters are told), and do the same for the
 * sub-agent sessions it spawned, recursively. Returns how many runs were stopped.
 */
import type { RunDeps } from "./run-deps.js";
import { enqueueArchive } from "../rotation/rotate.js";
import { enqueueContinuation } from "./continuation.js";

export async function stopSession(
  svc: Pick<RunDeps, "inbox" | "runs" | "cancels" | "sessions" | "queues" | "config">,
  sessionKey: string,
  seen = new Set<string>(),
  opts: { cascade?: boolean } = {},
): Promise<number> {
  if (seen.has(sessionKey)) return 0;
  seen.add(sessionKey);
  const dropped = await svc.inbox.drop(sessionKey);
  await svc.runs.killQueued(
    dropped.map((t) => t.runId),
    "stopped",
  );
  // What a dropped turn carried still happens: the transcript of a reset it belonged to is
  // archived, and a flow waiting on it (sessions_send) learns that it was killed.
  for (const turn of dropped) {
    if (turn.archive)
      await enqueueArchive(svc, {
        sessionKey,
        agentId: turn.agentId,
        sessionId: turn.archive.sessionId,
        kind: turn.archive.kind,
      });
    await enqueueContinuation(svc, turn, { status: "killed", error: "stopped" });
  }
  let count = dropped.length;
  const inflight = await svc.inbox.inflightTurn(sessionKey);
  if (inflight) {
    // Flag first, then broadcast: a run taken but not yet registered with its worker when the
    // broadcast goes out finds the flag when it starts (turn-executor), so no stop is lost.
    await svc.runs.requestCancel(inflight.runId, "killed");
    await svc.cancels.publish({ sessionKey, runId: inflight.runId, reason: "killed" });
    count++;
  }
  if (opts.cascade === false) return count; // a steer restarts only this session's run
  for (const child of await svc.sessions.childKeys(sessionKey)) count += await stopSession(svc, child, seen);
  return count;
}
