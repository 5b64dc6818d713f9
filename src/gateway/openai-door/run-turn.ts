/**
 * One chat-completions request as a turn: the same path as the `agent` RPC — its sendPolicy is
 * enforced, the session is created if new (only once allowed), the turn is queued through the
 * session inbox (so it runs in order with every other door's turns for that session), and the run
 * is awaited through the process's run waiter, answered from Redis by whichever worker runs it.
 */
import type { GatewayDeps } from "../gateway-deps.js";
import { ensureSessionForSend } from "../../storage/ensure-session.js";
import { sessionForTurn } from "../../rotation/turn-session.js";
import { doorLimit, enqueueTurnOnce, requestDrain } from "../../runs/enqueue.js";
import type { RunRecord } from "../../runs/run-records.js";
import { isTerminal } from "../../runs/turn.js";
import { uuidFrom } from "../../runs/derived-id.js";

export interface StartedTurn {
  runId: string;
  sessionKey: string;
  sessionId: string;
}

/**
 * `runId`: derived from the request's Idempotency-Key (doorRunId), so a client's retry of a turn
 * it has no answer for finds the first one (to wait on, or its result) instead of queuing a copy.
 */
export async function startTurn(
  svc: GatewayDeps,
  sessionKey: string,
  text: string,
  systemPrompt?: string,
  runId?: string,
): Promise<StartedTurn> {
  // The policy first, on the entry as it stands (none yet: the config's rules on the key alone),
  // so a refused request leaves nothing behind: a stateless call names a new session each time.
  const stored = await ensureSessionForSend(svc, sessionKey, await svc.sessions.get(sessionKey));
  const existing = runId ? await svc.runs.get(runId) : null;
  if (runId && existing) {
    // The first call may have queued the turn and then failed to wake the drainer (as the agent RPC).
    await requestDrain(svc, sessionKey);
    return { runId, sessionKey, sessionId: existing.sessionId ?? stored.sessionId };
  }
  const entry = await sessionForTurn(svc, stored);
  // A retry racing past the check above is not queued again: the push is once per runId. A full
  // inbox refuses the turn (429 queue_full).
  const { turn } = await enqueueTurnOnce(
    svc,
    {
      ...(runId ? { runId } : {}),
      sessionKey,
      agentId: entry.agentId,
      sessionId: entry.sessionId,
      text,
      step: "turn",
      provenance: "user",
      ...(systemPrompt ? { extraSystemPrompt: systemPrompt } : {}),
    },
    doorLimit(svc.config),
  );
  return { runId: turn.runId, sessionKey, sessionId: turn.sessionId };
}

/** The run a request with Idempotency-Key `key` maps to: the agent RPC's idempotencyKey mapping. */
export function doorRunId(sessionKey: string, key: string): string {
  return uuidFrom(`${sessionKey}\n${key}`);
}

/** Not done: `handedOver` says why the wait ended early (the gateway is shutting down). */
export type TurnOutcome =
  | { done: true; record: RunRecord }
  | { done: false; record: RunRecord | null; handedOver?: string };

/**
 * `signal`: aborted when the client went away. Its wait ends at once (its timer and its place on
 * the run-done subscription are let go, no more reads for it); the run goes on.
 */
export async function awaitTurn(
  svc: GatewayDeps,
  runId: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<TurnOutcome> {
  const { record, handedOver } = await svc.waiter().wait(runId, timeoutMs, signal ? { signal } : {});
  if (record && isTerminal(record.status)) return { done: true, record };
  return handedOver !== undefined ? { done: false, record, handedOver } : { done: false, record };
}
