/**
 * Replaying a dead letter: its message is queued again on its session as a new run (see
 * dead-letters.ts for the runId rule). When the session was reset meanwhile, the message goes
 * to the session's current transcript, as a message arriving now would; when it was deleted, to
 * the session created again.
 *
 * A letter whose run had saved its outcome before it was given up (it ran, but storage refused its
 * transcript lines until the deadline) carries that outcome (`result`, added by run-finish.lua), and
 * so does the turn its replay queues: the worker writes the saved lines and finishes the new run with
 * it, as the first run would have finished (waiters, delivery of the reply, its continuation), without
 * running the runtime and its tools a second time (src/workers/turn-executor.ts).
 */
import type { RunDeps } from "./run-deps.js";
import { SendBlockedError, SessionNotFoundError, SwitchboardError } from "../errors/index.js";
import { replayRunId, type DeadLetter } from "./dead-letters.js";
import { enqueueTurn } from "./enqueue.js";

type ReplayDeps = Pick<RunDeps, "deadLetters" | "sessions" | "inbox" | "queues" | "config">;

export interface Replayed {
  replayedAs: string;
  sessionKey: string;
  /** The run's saved outcome was reused: the replay writes it, the runtime does not run again. */
  reusedResult?: true;
}

export async function replayDeadLetter(svc: ReplayDeps, runId: string): Promise<Replayed> {
  const letter = await svc.deadLetters.get(runId);
  if (!letter) throw new SwitchboardError("not_found", `No dead letter for run ${runId}`);
  return await replayLetter(svc, letter);
}

/**
 * A letter `replayAllDeadLetters` left where it is: its session is gone for good (a sub-agent's,
 * deleted) or may not be created again (a send policy denies it).
 */
export interface Refused {
  runId: string;
  sessionKey: string;
  reason: string;
}

/**
 * Replay every dead letter that holds a readable turn, oldest first: the ones there are when it
 * starts (a letter given up again meanwhile waits for the next call). Only their runIds are read
 * up front (the index), each letter when its turn comes. A letter whose session cannot be had
 * again (a sub-agent's, deleted; one a send policy denies) is left and named in `refused`: one
 * such letter does not hold back the others.
 */
export async function replayAllDeadLetters(
  svc: ReplayDeps,
): Promise<{ replayed: ({ runId: string } & Replayed)[]; refused: Refused[] }> {
  const replayed = [];
  const refused: Refused[] = [];
  for (const id of await svc.deadLetters.runIds()) {
    const letter = await svc.deadLetters.get(id);
    if (!letter?.turn) continue; // replayed or discarded meanwhile, or unreadable (discard it)
    try {
      replayed.push({ runId: id, ...(await replayLetter(svc, letter)) });
    } catch (err) {
      if (!(err instanceof SessionNotFoundError || err instanceof SendBlockedError)) throw err;
      refused.push({ runId: id, sessionKey: letter.turn.sessionKey, reason: err.message });
    }
  }
  return { replayed, refused };
}

async function replayLetter(svc: ReplayDeps, letter: DeadLetter): Promise<Replayed> {
  if (!letter.turn)
    throw new SwitchboardError(
      "invalid_request",
      `Dead letter ${letter.runId} holds no readable turn (${letter.kind}); discard it instead`,
    );
  const { archive: _archived, runId: _old, enqueuedAt: _at, result: carried, ...turn } = letter.turn;
  // Saved by the run given up, or carried by its turn (a replay with a saved outcome, given up again).
  const result = letter.result ?? carried;
  const entry = await svc.sessions.get(turn.sessionKey);
  const queued = await enqueueTurn(
    svc,
    {
      ...turn,
      runId: replayRunId(letter),
      sessionId: entry?.sessionId ?? turn.sessionId,
      replays: letter.replays + 1,
      ...(result ? { result } : {}),
    },
    // A session that is gone (before that read or since) is created again, as a message arriving
    // for it now would create it: the turn must not run in the retired sessionId, whose
    // transcript was archived as deleted. A sub-agent session is not (its spawn wrote its depth
    // and role), and a send policy may refuse the session: the replay fails.
    { recreateDeleted: true },
  );
  // Removed only after the new run is queued: a crash in between leaves the letter, and a
  // second replay lands on the same derived runId (queued once).
  await svc.deadLetters.discard(letter.runId);
  return {
    replayedAs: queued.runId,
    sessionKey: queued.sessionKey,
    ...(result ? { reusedResult: true as const } : {}),
  };
}
