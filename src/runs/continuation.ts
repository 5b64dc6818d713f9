/**
 * Continuations: the job a turn asks for once it has an outcome (the next agent-to-agent step,
 * a sub-agent's announce). Added with the job id its kind derives from the runId
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
