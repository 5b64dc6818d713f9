/**
 * `/stop` (and `subagents kill`): abort the session's running turn wherever it runs, drop its
 * queued turns (their records become `killed`, waiters are told), and do the same for the
 * sub-agent sessions it spawned, recursively. Returns how many runs were stopped.
 *
 * The stop drops the turns queued when it started: its first step takes the whole inbox aside at
 * once, and the rest are dropped in bounded steps (`Inbox.drop`, stop-queued.lua), so a huge inbox
 * never stalls Redis. A turn pushed after that first step is queued and runs as usual, even when
 * the client resends that step after a reconnect: the step records its cut, and a cut found
 * recorded takes nothing (`RedisKeys.stopCut`).
 *
 * What a dropped turn carried still happens: its continuation (a sub-agent's announce, the next
 * agent-to-agent step, which learns the turn was killed) and the archive of a reset it belonged
 * to. The drop keeps each turn in the stopped-turns hash, in the same step, until both are
 * queued; a stop that dies in between leaves it there, and the maintenance sweep queues them
 * (`requeueStopped`). Both jobs have ids derived from the turn, so they are added once. A stop
 * that dies between its steps leaves the rest of its turns aside, and the same sweep drops them.
 */
import type { RunDeps } from "./run-deps.js";
import { enqueueArchiveOf } from "../rotation/rotate.js";
import { enqueueContinuation } from "./continuation.js";
import { isTerminal, type Turn } from "./turn.js";

/** A dropped turn still kept after this long was left by a stop that died: the sweep takes it. */
export const STOPPED_TURN_ORPHANED_MS = 60_000;

export async function stopSession(
  svc: Pick<RunDeps, "inbox" | "runs" | "cancels" | "sessions" | "queues" | "config">,
  sessionKey: string,
  seen = new Set<string>(),
  opts: { cascade?: boolean } = {},
): Promise<number> {
  if (seen.has(sessionKey)) return 0;
  seen.add(sessionKey);
  let count = 0;
  let first = true;
  for await (const dropped of svc.inbox.drop(sessionKey, STOPPED_ERROR)) {
    await carryOn(svc, dropped);
    count += dropped.length;
    if (!first) continue;
    first = false;
    // Right after the first step, which took the queued turns aside: none of them can begin now,
    // and the running turn is aborted without waiting for the rest of a long inbox to be dropped.
    const inflight = await svc.inbox.inflightTurn(sessionKey);
    if (inflight) {
      // Flag first, then broadcast: a run taken but not yet registered with its worker when the
      // broadcast goes out finds the flag when it starts (turn-executor), so no stop is lost.
      await svc.runs.requestCancel(inflight.runId, "killed");
      await svc.cancels.publish({ sessionKey, runId: inflight.runId, reason: "killed" });
      count++;
    }
  }
  if (opts.cascade === false) return count; // a steer restarts only this session's run
  for (const child of await svc.sessions.childKeys(sessionKey)) count += await stopSession(svc, child, seen);
  return count;
}

/**
 * Stop one run of the session (a steer stopping the run it replaces): its queued turn is
 * dropped (what it carried still queued, as for `/stop`), or, once begun and not finished, it is
 * aborted wherever it runs. Every other turn of the session stays queued and nothing else is
 * aborted; the session's descendants are left alone. Returns whether the run was stopped.
 */
export async function stopRun(
  svc: Pick<RunDeps, "inbox" | "runs" | "cancels" | "queues" | "config">,
  sessionKey: string,
  runId: string,
): Promise<boolean> {
  const dropped = await svc.inbox.dropRun(sessionKey, runId, STOPPED_ERROR);
  await carryOn(svc, dropped);
  if (dropped.length) return true;
  // Not queued (any more): begun, finished, or never queued; or passed over by the search (turns
  // begun meanwhile moved it forward), and then its cancel flag stops it when it begins. Dropping
  // first means a turn begun in between is found here. Only this run is aborted, by its runId.
  const rec = await svc.runs.get(runId);
  if (!rec || isTerminal(rec.status)) return false;
  await svc.runs.requestCancel(runId, "killed");
  await svc.cancels.publish({ sessionKey, runId, reason: "killed" });
  return true;
}

const STOPPED_ERROR = "stopped";

/** Queue what the dropped `turns` carried (see the module comment), then forget them. */
async function carryOn(svc: Pick<RunDeps, "inbox" | "queues" | "config">, turns: Turn[]): Promise<void> {
  for (const turn of turns) {
    await enqueueArchiveOf(svc, turn);
    await enqueueContinuation(svc, turn, { status: "killed", error: STOPPED_ERROR });
  }
  await svc.inbox.stoppedDone(...turns.map((t) => t.runId));
}

/**
 * The maintenance sweep's part, for stops that died: the turns a stop took aside and had not
 * dropped yet (its last step longer than STOPPED_TURN_ORPHANED_MS ago, so never a live stop's;
 * at most `limit` such stops, each finished in bounded steps), then turns dropped whose carried
 * jobs were not queued (kept longer than that). Returns how many turns it dropped or queued for.
 */
export async function requeueStopped(
  svc: Pick<RunDeps, "inbox" | "queues" | "config">,
  limit: number,
  now = Date.now(),
): Promise<number> {
  let count = 0;
  for (const stopId of await svc.inbox.stopsBefore(now - STOPPED_TURN_ORPHANED_MS, limit)) {
    for await (const dropped of svc.inbox.resumeStop(stopId, STOPPED_ERROR)) {
      await carryOn(svc, dropped);
      count += dropped.length;
    }
  }
  const orphans = await svc.inbox.stoppedBefore(now - STOPPED_TURN_ORPHANED_MS, limit);
  await carryOn(svc, orphans);
  return count + orphans.length;
}
