/**
 * The one way a turn enters the system (inbound chat, `agent` RPC, sessions_send, reply-back
 * and announce steps): push it to the session inbox with its run record, then wake the
 * session's drainer. Push-before-wake is what makes the dedup'd drain job sufficient.
 *
 * A door's push (a client's or a tool's new turn) passes `doorLimit(config)`: into a session
 * whose inbox already holds `gateway.limits.maxQueuedTurns` turns, or whose queued turns it would
 * take past `gateway.limits.maxQueuedBytes`, it is refused with `QueueFullError` (429
 * `queue_full`), checked in the push itself. Every other push (continuations,
 * announce and agent-to-agent steps, replays, steers, re-pushes) passes none and is never refused:
 * refusing it would lose work that was already accepted.
 *
 * A door's turn is never queued into a session deleted between the caller's read and the push:
 * the push refuses it and the session is created again, as the door does for one that does not
 * exist (see `enqueueTurnOnce`).
 */
import { randomUUID } from "node:crypto";
import type { RunDeps } from "./run-deps.js";
import type { Turn } from "./turn.js";
import { addJob } from "../queues/jobs.js";
import type { Config } from "../config/schema.js";
import { isSubagentKey } from "../session/key-classify.js";
import { SessionNotFoundError, SwitchboardError } from "../errors/index.js";
import { ensureSessionForSend } from "../storage/ensure-session.js";

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

/** How full a session's inbox may be for a push to be queued (none: never refused). */
export interface PushLimit {
  /** Refused when the inbox already holds this many turns; 0 or unset: no limit. */
  maxQueued?: number;
  /** Refused when the inbox holds turns and this one would take their bytes past it; 0 or unset: no limit. */
  maxQueuedBytes?: number;
  /**
   * A door's push (or a replay's): a session deleted between the caller's read and the push is
   * created again (as the door creates one that does not exist), and the turn queued in it; a
   * sub-agent session is not (its entry carries its depth and role): the push fails.
   */
  recreateDeleted?: boolean;
  /**
   * The caller built the turn from the session's entry, read just before (an announce into its
   * requester, an agent-to-agent step): no entry at the push means the session was
   * deleted since, and the turn is refused (`session_not_found`) instead of being queued
   * unchecked into the retired sessionId, whose transcript is archived as deleted.
   */
  existed?: boolean;
}

/**
 * The limits of a door's push: `gateway.limits.maxQueuedTurns` and `maxQueuedBytes` (0: none),
 * and a session deleted meanwhile created again. Only doors pass them.
 */
export function doorLimit(config: Pick<Config, "gateway">): PushLimit {
  return {
    maxQueued: config.gateway.limits.maxQueuedTurns,
    maxQueuedBytes: config.gateway.limits.maxQueuedBytes,
    recreateDeleted: true,
  };
}

/**
 * A caller that passes a deterministic `runId` (a retried job, an idempotency key) gets exactly
 * one turn for it: a runId whose record exists is not queued again (`queued: false`). A caller
 * that passes none gets a new runId, so its turn is always `queued`.
 *
 * The turn runs in the session's current sessionId: a reset (on any gateway) between the
 * caller's read of the entry and the push moves it to the new one, checked in the push itself
 * (turn-push.lua), so it never lands in a transcript that is being archived.
 *
 * A session with no entry is refused by that check too: deleted in that window (sessions.delete,
 * pruning, a sub-agent's clean-up), its transcript is archived as deleted or about to be, and a
 * turn in its sessionId would write a live transcript that no entry names and nothing archives or
 * prunes again. A door's turn (`limit.recreateDeleted`) then goes into the session created
 * again. A sub-agent session has its entry before its first turn (its spawn writes it), so one
 * with no entry was deleted:
 * any push into it throws `session_not_found` (a steer of a child cleaned up; an announce then
 * finds its requester gone), and so does a push whose caller read the entry first
 * (`limit.existed`). Any other turn is queued where it is, unchecked, as before: no entry cannot
 * be told from never having had one (a turn queued by a test).
 */
export async function enqueueTurn(svc: PushDeps, req: TurnRequest, limit: PushLimit = {}): Promise<Turn> {
  return (await enqueueTurnOnce(svc, req, limit)).turn;
}

/** `enqueueTurn`, also saying whether this call queued the turn (false: its runId existed). */
export async function enqueueTurnOnce(
  svc: PushDeps,
  req: TurnRequest,
  limit: PushLimit = {},
): Promise<{ turn: Turn; queued: boolean }> {
  let turn = newTurn(req);
  for (let attempt = 1; ; attempt++) {
    const check = Object.assign({}, limit, { checkSessionId: attempt <= MAX_SESSION_FOLLOWS });
    const res = await pushTurn(svc, turn, check, req.runId === undefined);
    if (!("changed" in res)) return res;
    if (res.changed === null) {
      // No entry: nothing was queued, so a retry with the same runId pushes it afresh.
      if (!limit.recreateDeleted && !limit.existed && !isSubagentKey(turn.sessionKey)) {
        attempt = MAX_SESSION_FOLLOWS; // the next push is unchecked
        continue;
      }
      // Still checked after a re-creation: a push right after it is never unchecked.
      if (attempt >= MAX_SESSION_FOLLOWS)
        throw new SwitchboardError("unavailable", "the session kept being deleted while the turn was queued");
      turn = { ...turn, sessionId: (await recreateDeleted(svc, turn.sessionKey, limit)).sessionId };
      continue;
    }
    const current = sessionIdOf(res.changed);
    // Reset meanwhile: the turn moves to the new sessionId. An entry the check could not read
    // (not written by session-upsert.lua) takes the turn where it is, unchecked.
    if (current !== undefined && current !== turn.sessionId) turn = { ...turn, sessionId: current };
    else attempt = MAX_SESSION_FOLLOWS;
  }
}

/**
 * `enqueueTurnOnce` for a turn built from the session entry `expectEntry` (its stored JSON, e.g.
 * a gateway's cached copy): queued only if the entry is still exactly that, checked in the
 * push itself (turn-push.lua). Otherwise nothing is queued and `changed` is the current entry
 * JSON (null: no session), for the caller to decide again. Without `expectEntry`, `enqueueTurnOnce`.
 */
export async function enqueueTurnIfEntry(
  svc: PushDeps,
  req: TurnRequest,
  expectEntry: string | undefined,
  limit: PushLimit = {},
): Promise<{ turn: Turn; queued: boolean } | { changed: string | null }> {
  if (expectEntry === undefined) return await enqueueTurnOnce(svc, req, limit);
  return await pushTurn(svc, newTurn(req), Object.assign({}, limit, { expectEntry }), req.runId === undefined);
}

/**
 * `enqueueTurnOnce` for a turn that belongs to the session as the caller found it (an inbound
 * message, decided on that entry's freshness): queued only if the session still has the turn's
 * sessionId. Otherwise nothing is queued and `changed` is the current entry JSON (null: deleted
 * meanwhile), for the caller to decide again.
 */
export async function enqueueTurnInSession(
  svc: Pick<RunDeps, "inbox" | "queues" | "config">,
  req: TurnRequest,
  limit: PushLimit = {},
): Promise<{ turn: Turn; queued: boolean } | { changed: string | null }> {
  return await pushTurn(svc, newTurn(req), Object.assign({}, limit, { checkSessionId: true }), req.runId === undefined);
}

/**
 * What a push touches. The session store only to create a door's session again after a delete:
 * a caller without it (a test of the push alone) gets `session_not_found` then.
 */
type PushDeps = Pick<RunDeps, "inbox" | "queues" | "config"> & Partial<Pick<RunDeps, "sessions">>;

/** How many resets in a row a push follows to the new sessionId before it pushes unchecked. */
const MAX_SESSION_FOLLOWS = 5;

/**
 * The session `sessionKey` created again after a delete that landed between the caller's read
 * and its push: for a door's push only, under the same send-policy checks a door makes before
 * creating a session (on none, then on the entry created, which a concurrent caller may have
 * written). A sub-agent session is not: a bare entry would lose the depth and role its tools
 * are decided on.
 */
async function recreateDeleted(svc: PushDeps, sessionKey: string, limit: PushLimit): Promise<{ sessionId: string }> {
  const sessions = svc.sessions;
  if (!limit.recreateDeleted || isSubagentKey(sessionKey) || !sessions)
    throw new SessionNotFoundError(sessionKey, `Session ${sessionKey} was deleted before its turn was queued`);
  return await ensureSessionForSend({ config: svc.config, sessions }, sessionKey, null);
}

function newTurn(req: TurnRequest): Turn {
  const now = Date.now();
  // Object.assign, not a spread, here and for the option bags of this file's pushes: a copy of
  // an object made by a spread costs ~2 µs per property added after it on Node 20
  // (docs/development.md, "Copies on the hot path").
  return Object.assign({}, req, { runId: req.runId ?? randomUUID(), enqueuedAt: now, messageTs: req.messageTs ?? now });
}

function sessionIdOf(entryJson: string): string | undefined {
  try {
    const id = (JSON.parse(entryJson) as { sessionId?: unknown }).sessionId;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One push and its wake-up. `minted`: the runId was minted for this call, so a push that finds
 * it existing ran already and its answer was lost with the connection, which the client then
 * sent it again on (ioredis resends unanswered commands after a reconnect): the turn is queued
 * once, by this call.
 */
async function pushTurn(
  svc: Pick<RunDeps, "inbox" | "queues" | "config">,
  turn: Turn,
  {
    recreateDeleted: _recreate,
    existed: _existed,
    ...condition
  }: PushLimit & {
    expectEntry?: string;
    checkSessionId?: boolean;
  },
  minted: boolean,
): Promise<{ turn: Turn; queued: boolean } | { changed: string | null }> {
  const ready = readyWake(svc.config, turn.sessionKey);
  const pushed = await svc.inbox.push(turn, Object.assign({}, condition, { ready }));
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
