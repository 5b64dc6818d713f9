/**
 * A turn: one message for one session, waiting in that session's inbox until the session's
 * lease holder runs it. Everything a worker needs travels in the turn, so a worker on any host
 * can run it; the transcript and run record are keyed by `runId`, which makes re-runs after a
 * crash idempotent.
 */
import type { RunProvenance, RunStep } from "../runtimes/types.js";
import type { InterSessionSource } from "../runtimes/inter-session.js";
import type { DeliveryContext } from "../session/session-entry.js";
import { luaSafeJson } from "../text/well-formed.js";
import type { TerminalStatus } from "./run-status.js";

/** Built by `continuationOf` (src/queues/jobs.ts), which also fills in queue, id and retries. */
export interface TurnContinuation {
  /** Queue and job name to add when the run has a result (e.g. the next agent-to-agent step). */
  queue: string;
  name: string;
  data: Record<string, unknown>;
  /** Job id to add it under (default `cont-<runId>`); retries of the adding turn add it once. */
  jobId?: string;
  attempts?: number;
  backoffMs?: number;
}

export interface Turn {
  runId: string;
  sessionKey: string;
  agentId: string;
  /** The transcript this turn belongs to (fixed at enqueue time, so a later reset cannot move it). */
  sessionId: string;
  text: string;
  step: RunStep;
  provenance: RunProvenance;
  /** Inter-session origin, stored on the user message. */
  source?: InterSessionSource;
  extraSystemPrompt?: string;
  /** Message time (ms): the user line's timestamp. */
  messageTs: number;
  enqueuedAt: number;
  /** Where the reply goes (an inbound chat), if anywhere. */
  deliver?: DeliveryContext & { channel: string };
  runTimeoutSeconds?: number;
  continuation?: TurnContinuation;
  /** Agent-to-agent loop guard: hops taken by the chain this turn belongs to. */
  hop?: number;
  traceId?: string;
  model?: string;
  /** A reset that happened with this turn: its old transcript is archived before the turn runs,
   *  in session order, so earlier turns still finish in the old transcript. */
  archive?: { sessionId: string; kind: "reset" | "deleted" };
  /** Set on a dead letter queued again by an operator: how many times it was replayed. */
  replays?: number;
  /**
   * A replayed dead letter whose run had its outcome saved before it was given up (docs/concepts/reliability.md,
   * "Dead letters"): the worker writes these lines and finishes the run without running the runtime (its tools) again.
   */
  result?: SavedOutcome;
}

/**
 * A run's outcome as saved on its record before its transcript lines are written (`resultSaved` and the fields
 * beside it), carried by a dead letter and by its replay.
 */
export interface SavedOutcome {
  status: TerminalStatus;
  /** A successful run's reply. */
  reply?: string;
  error?: string;
  /** When it was produced (ms): its transcript lines' time. */
  at: number;
  /** The runtime output the lines are built from (tool calls, model, usage, yielded), as JSON: `resultOutput`. */
  output?: string;
}

export { isTerminal, type TerminalStatus, type RunStatus } from "./run-status.js";

/**
 * A turn as stored in the inbox and in-flight lists: JSON with well-formed strings (Lua's cjson
 * refuses lone surrogates), runId first so it is easy to spot in Bull Board and redis-cli.
 */
export function serializeTurn(turn: Turn): string {
  const { runId, ...rest } = turn;
  return luaSafeJson({ runId, ...rest });
}
