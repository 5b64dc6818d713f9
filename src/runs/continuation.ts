/**
 * Continuations: the job a turn asks for once it has an outcome (the next agent-to-agent step).
 * Added with a job id derived from the runId and retried like any job, so it is added once even
 * when the turn is re-run, and the steps it enqueues are idempotent too.
 */
import type { RunDeps } from "./run-deps.js";
import { jobIdPart } from "../queues/queue-names.js";
import type { Turn, TerminalStatus } from "./turn.js";

export async function enqueueContinuation(
  svc: Pick<RunDeps, "queues">,
  turn: Turn,
  result: { status: TerminalStatus; reply?: string; error?: string },
): Promise<void> {
  const c = turn.continuation;
  if (!c) return;
  const queue = svc.queues[c.queue as keyof typeof svc.queues];
  if (!queue) return;
  const data = { ...c.data, runId: turn.runId, reply: result.reply ?? "", status: result.status, ...(result.error ? { error: result.error } : {}) };
  await queue.add(c.name, data, {
    jobId: c.jobId ?? `cont-${jobIdPart(turn.runId)}`,
    attempts: c.attempts ?? 10,
    backoff: { type: "exponential", delay: c.backoffMs ?? 500 },
  });
}
