/**
 * Replaying a dead letter: its message is queued again on its session as a new run (see
 * dead-letters.ts for the runId rule). When the session was reset meanwhile, the message goes
 * to the session's current transcript, as a message arriving now would.
 */
import type { RunDeps } from "./run-deps.js";
import { SwitchboardError } from "../errors/index.js";
import { replayRunId } from "./dead-letters.js";
import { enqueueTurn } from "./enqueue.js";

export async function replayDeadLetter(
  svc: Pick<RunDeps, "deadLetters" | "sessions" | "inbox" | "queues" | "config">,
  runId: string,
): Promise<{ replayedAs: string; sessionKey: string }> {
  const letter = await svc.deadLetters.get(runId);
  if (!letter) throw new SwitchboardError("not_found", `No dead letter for run ${runId}`);
  if (!letter.turn)
    throw new SwitchboardError(
      "invalid_request",
      `Dead letter ${runId} holds no readable turn (${letter.kind}); discard it instead`,
    );
  const { archive: _archived, runId: _old, enqueuedAt: _at, ...turn } = letter.turn;
  const entry = await svc.sessions.get(turn.sessionKey);
  const queued = await enqueueTurn(svc, {
    ...turn,
    runId: replayRunId(letter),
    sessionId: entry?.sessionId ?? turn.sessionId,
    replays: letter.replays + 1,
  });
  // Removed only after the new run is queued: a crash in between leaves the letter, and a
  // second replay lands on the same derived runId (queued once).
  await svc.deadLetters.discard(runId);
  return { replayedAs: queued.runId, sessionKey: queued.sessionKey };
}
