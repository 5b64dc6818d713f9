/**
 * The one way a turn enters the system (inbound chat, `agent` RPC, sessions_send, reply-back
 * and announce steps): push it to the session inbox with its run record, then wake the
 * session's drainer. Push-before-wake is what makes the dedup'd drain job sufficient.
 */
import { randomUUID } from "node:crypto";
import type { RunDeps } from "./run-deps.js";
import type { Turn } from "./turn.js";
import { addJob } from "../queues/jobs.js";
import type { Config } from "../config/schema.js";
import { isSubagentKey } from "../session/key-classify.js";

/**
 * Whether a push into an idle session readies it on the ready list (workers pop it as the wake)
 * rather than asking for a drain job: `workers.wake: "ready-list"`, except for sub-agent
 * sessions, which drain on the subagents queue so its global concurrency caps them.
 */
export function readyWake(config: Pick<Config, "workers">, sessionKey: string): boolean {
  return config.workers.wake === "ready-list" && !isSubagentKey(sessionKey);
}

/**
 * Wake the session's drainer (its turns must already be in the inbox). The drain job is
 * deduplicated per session; sub-agent sessions drain on their own queue, whose global
 * concurrency caps sub-agent runs across the deployment (src/queues/jobs.ts).
 */
export async function requestDrain(
  svc: Pick<RunDeps, "queues" | "config">,
  sessionKey: string,
  delayMs = 0,
): Promise<void> {
  await addJob(svc, "drain", { sessionKey }, delayMs > 0 ? { delay: delayMs } : {});
}

export type TurnRequest = Omit<Turn, "runId" | "enqueuedAt" | "messageTs"> & { runId?: string; messageTs?: number };

/**
 * A caller that passes a deterministic `runId` (a retried job, an idempotency key) gets exactly
 * one turn for it: a runId whose record exists is not queued again (`queued: false`). A caller
 * that passes none gets a new runId, so its turn is always `queued`.
 */
export async function enqueueTurn(svc: Pick<RunDeps, "inbox" | "queues" | "config">, req: TurnRequest): Promise<Turn> {
  return (await enqueueTurnOnce(svc, req)).turn;
}

/** `enqueueTurn`, also saying whether this call queued the turn (false: its runId existed). */
export async function enqueueTurnOnce(
  svc: Pick<RunDeps, "inbox" | "queues" | "config">,
  req: TurnRequest,
): Promise<{ turn: Turn; queued: boolean }> {
  return (await enqueueTurnIfEntry(svc, req, undefined)) as { turn: Turn; queued: boolean };
}

/**
 * `enqueueTurnOnce` for a turn built from the session entry `expectEntry` (its stored JSON, e.g.
 * a gateway's cached copy): queued only if the entry is still exactly that, checked in the
 * push itself (turn-push.lua). Otherwise nothing is queued and `changed` is the current entry
 * JSON (null: no session), for the caller to decide again.
 */
export async function enqueueTurnIfEntry(
  svc: Pick<RunDeps, "inbox" | "queues" | "config">,
  req: TurnRequest,
  expectEntry: string | undefined,
): Promise<{ turn: Turn; queued: boolean } | { changed: string | null }> {
  const now = Date.now();
  // A runId minted here is new: if the push finds it existing, this very push ran already and
  // its answer was lost with the connection, which the client then sent it again on (ioredis
  // resends unanswered commands after a reconnect). The turn is queued once, by this call.
  const minted = req.runId === undefined;
  const turn: Turn = { ...req, runId: req.runId ?? randomUUID(), enqueuedAt: now, messageTs: req.messageTs ?? now };
  const ready = readyWake(svc.config, turn.sessionKey);
  const pushed = await svc.inbox.push(turn, expectEntry !== undefined ? { expectEntry, ready } : { ready });
  if (typeof pushed === "object") return pushed;
  // Queued behind other turns: the session's drainer exists and will reach this one. Readied:
  // the push put the session on the ready list in the same step, which is the wake.
  if (pushed === "queued" || pushed === "ready") return { turn, queued: true };
  // Into an idle session, or a retry of a runId that existed (a first attempt may have pushed
  // and then died before adding the drain job): wake. The add is deduplicated per session.
  // The pending wake the push recorded is cleared by the drainer when it takes the turn
  // (begin-next.lua): no clean-up round trip here.
  await requestDrain(svc, turn.sessionKey);
  return { turn, queued: pushed === "wake" || minted };
}
