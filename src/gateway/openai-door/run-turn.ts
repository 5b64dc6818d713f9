/**
 * One chat-completions request as a turn: the same path as the `agent` RPC — the session is
 * created if new, its sendPolicy is enforced, the turn is queued through the session inbox (so
 * it runs in order with every other door's turns for that session), and the run is awaited
 * through the process's run waiter, answered from Redis by whichever worker runs it.
 */
import type { GatewayDeps } from "../gateway-deps.js";
import { SendBlockedError } from "../../errors/index.js";
import { ensureSession } from "../../storage/ensure-session.js";
import { sessionForTurn } from "../../rotation/turn-session.js";
import { sessionSendPolicy } from "../../session/stored-send-policy.js";
import { enqueueTurnOnce } from "../../runs/enqueue.js";
import type { RunRecord } from "../../runs/run-records.js";
import { isTerminal } from "../../runs/turn.js";

export interface StartedTurn {
  runId: string;
  sessionKey: string;
  sessionId: string;
}

export async function startTurn(
  svc: GatewayDeps,
  sessionKey: string,
  text: string,
  systemPrompt?: string,
): Promise<StartedTurn> {
  const stored = await ensureSession(svc, sessionKey);
  if (sessionSendPolicy(svc.config, sessionKey, stored) === "deny") throw new SendBlockedError(sessionKey);
  const entry = await sessionForTurn(svc, stored);
  const { turn } = await enqueueTurnOnce(svc, {
    sessionKey,
    agentId: entry.agentId,
    sessionId: entry.sessionId,
    text,
    step: "turn",
    provenance: "user",
    ...(systemPrompt ? { extraSystemPrompt: systemPrompt } : {}),
  });
  return { runId: turn.runId, sessionKey, sessionId: turn.sessionId };
}

export type TurnOutcome = { done: true; record: RunRecord } | { done: false; record: RunRecord | null };

export async function awaitTurn(svc: GatewayDeps, runId: string, timeoutMs: number): Promise<TurnOutcome> {
  const { record } = await svc.waiter().wait(runId, timeoutMs);
  return record && isTerminal(record.status) ? { done: true, record } : { done: false, record };
}
