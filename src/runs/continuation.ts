/**
 * Continuations: the job a turn asks for once it has an outcome (a sub-agent's announce; an
 * agent-to-agent step only when no worker finishes the turn, e.g. one dropped by `/stop`: a
 * finishing worker applies that step in the finish itself, see src/workers/turn-executor.ts).
 * Added with the job id its kind derives from the runId
 * (src/queues/jobs.ts) and retried like any job, so it is added once even when the turn is
 * re-run, and the steps it enqueues are idempotent too.
 */
import type { RunDeps } from "./run-deps.js";
import { addJob, jobKindByName } from "../queues/jobs.js";
import type { Turn, TerminalStatus } from "./turn.js";

export async function enqueueContinuation(
  svc: Pick<RunDeps, "queues" | "config">,
  turn: Turn,
  result: { status: TerminalStatus; reply?: string; error?: string },
): Promise<void> {
  const c = turn.continuation;
  if (!c) return;
  // Queue, id and retries come from the jobs table; the copies stored in the turn are for
  // workers of the previous release.
  const kind = jobKindByName(c.name);
  if (kind !== "a2aStep" && kind !== "subagentAnnounce") return;
  const data = {
    ...c.data,
    runId: turn.runId,
    reply: result.reply ?? "",
    status: result.status,
    ...(result.error ? { error: result.error } : {}),
  };
  await addJob(svc, kind, data as never);
}
