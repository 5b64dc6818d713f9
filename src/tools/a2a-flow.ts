/**
 * What happens after a sessions_send, as chained jobs on the `announce` queue (each visible in
 * Bull Board, each retried by BullMQ, none held in memory):
 *
 *   target run finishes ─▶ a2a.step(after-primary)
 *     └─ reply-back loop: turn 1 in the REQUESTER with the target's reply, turn 2 in the target…
 *        up to maxPingPongTurns, stopped early by exactly REPLY_SKIP / NO_REPLY or the hop bound
 *   ─▶ announce turn in the TARGET ─▶ a2a.step(after-announce)
 *     └─ ANNOUNCE_SKIP (or silence): nothing; anything else: a durable delivery to the target's
 *        channel (stored delivery context, else parsed from its key).
 *
 * Each step is a turn enqueued with a continuation, so the next job is added (with a job id
 * derived from the runId) when that turn has its result. A requester whose wait timed out still
 * gets the reply: the flow sees the `late` flag and delivers it even with zero ping-pong turns.
 */
import { retryLater } from "../queues/retry-later.js";
import type { Job } from "bullmq";
import type { ToolDeps } from "./tool-deps.js";
import { isSilentReply } from "../history/silent-reply.js";
import { sanitizeForHandoff } from "../history/handoff.js";
import { enqueueTurn } from "../runs/enqueue.js";
import { isTerminal } from "../runs/turn.js";
import { storedRoute } from "../session/stored-route.js";
import { enqueueDelivery } from "../delivery/deliver.js";
import { uuidFrom } from "../runs/derived-id.js";
import { ANNOUNCE_MESSAGE, announceContext, replyContext } from "./a2a-prompts.js";
import { JOBS, continuationOf, jobData, type A2AState, type A2AStepData } from "../queues/jobs.js";
import type { TurnContinuation } from "../runs/turn.js";

/** The flow's state, carried from step to step; its schema is in the jobs table. */
export type { A2AState } from "../queues/jobs.js";

/** About 15 minutes of backing-off checks for the followed run to become terminal. */
const MAX_TERMINAL_WAITS = 200;

export const A2A_STEP = JOBS.a2aStep.name;

/** The step job that follows the turn `runId` (filled in with its outcome when it has one). */
function continuation(svc: ToolDeps, runId: string, state: A2AState): TurnContinuation {
  return continuationOf("a2aStep", runId, state, svc.config);
}

/** A reply that ends the ping-pong (silence, REPLY_SKIP, NO_REPLY). */
function stops(reply: string | undefined): boolean {
  return isSilentReply("reply-back", reply);
}

/** False when that side has no session (an HTTP caller that never chatted, a deleted one): no step. */
/**
 * Step turns get runIds derived from the run they follow, so a retried announce-queue job
 * re-enqueues nothing (enqueueTurn skips a runId that already exists).
 */
function stepRunId(afterRunId: string, kind: string): string {
  return uuidFrom(`a2a:${afterRunId}:${kind}`);
}

async function enqueueStep(
  svc: ToolDeps,
  state: A2AState,
  afterRunId: string,
  to: "requester" | "target",
  text: string,
  turnNo: number,
): Promise<boolean> {
  const toKey = to === "requester" ? state.requesterKey : state.targetKey;
  const fromKey = to === "requester" ? state.targetKey : state.requesterKey;
  const entry = await svc.sessions.get(toKey);
  if (!entry) return false;
  const runId = stepRunId(afterRunId, `reply-${turnNo}`);
  await enqueueTurn(svc, {
    runId,
    sessionKey: toKey,
    agentId: entry.agentId,
    sessionId: entry.sessionId,
    text,
    step: "reply",
    provenance: "inter_session",
    source: { sessionKey: fromKey, tool: "sessions_send", runId: afterRunId },
    extraSystemPrompt: replyContext(state, turnNo, state.maxTurns, to),
    hop: state.hop + 1,
    traceId: state.traceId,
    continuation: continuation(svc, runId, {
      ...state,
      turn: turnNo,
      phase: "after-reply",
      current: to,
      hop: state.hop + 1,
    }),
  });
  return true;
}

async function enqueueAnnounce(svc: ToolDeps, state: A2AState, afterRunId: string): Promise<void> {
  const entry = await svc.sessions.get(state.targetKey);
  if (!entry) return;
  const runId = stepRunId(afterRunId, "announce");
  await enqueueTurn(svc, {
    runId,
    sessionKey: state.targetKey,
    agentId: entry.agentId,
    sessionId: entry.sessionId,
    text: ANNOUNCE_MESSAGE,
    step: "announce",
    provenance: "inter_session",
    source: { sessionKey: state.requesterKey, tool: "sessions_send", runId: afterRunId },
    extraSystemPrompt: announceContext(state, state.original, state.round1, state.latest),
    hop: state.hop + 1,
    traceId: state.traceId,
    continuation: continuation(svc, runId, { ...state, phase: "after-announce", hop: state.hop + 1 }),
  });
}

async function deliverAnnounce(svc: ToolDeps, state: A2AState, runId: string, reply: string): Promise<void> {
  const entry = await svc.sessions.get(state.targetKey);
  // No route at all is still recorded (as no_route on the "none" channel), never dropped.
  const route = storedRoute(state.targetKey, entry) ?? { channel: "none" };
  await enqueueDelivery(svc, {
    id: `announce-${runId}`,
    sessionKey: state.targetKey,
    route,
    message: reply.trim(),
    kind: "announce",
  });
}

/** What a phase handler gets: the step's data (reply cleaned for hand-off) and the flow's own state. */
interface StepContext {
  svc: ToolDeps;
  d: A2AStepData;
  state: A2AState;
  maxHops: number;
}

/**
 * The flow as a phase table: a step job runs the handler of the phase it follows (once that run
 * is terminal and ended `ok`; a failed run ends the flow, see the processor).
 *
 * | phase          | the run it follows                  | next                                            |
 * |----------------|-------------------------------------|-------------------------------------------------|
 * | after-primary  | the target's turn with the message  | reply-back turn 1 in the requester, else (late  |
 * |                |                                     | requester) the late reply; then the announce    |
 * | after-reply    | a reply-back turn (`current` side)  | the other side's turn, or the announce once a   |
 * |                |                                     | side stops, or turns / hops run out             |
 * | after-announce | the target's announce turn          | a delivery to the target's channel, unless silent|
 */
const PHASES: Record<A2AState["phase"], (c: StepContext) => Promise<Record<string, unknown>>> = {
  "after-primary": afterPrimary,
  "after-reply": afterReply,
  "after-announce": afterAnnounce,
};

async function afterPrimary({ svc, d, state, maxHops }: StepContext): Promise<Record<string, unknown>> {
  state.round1 = d.reply;
  state.latest = d.reply;
  // Read, not consumed: a retried job must see it again (it expires on its own).
  const late = (await svc.redis.exists(svc.keys.a2aLate(d.primaryRunId))) === 1;
  const loop = state.maxTurns > 0 && state.requesterKey !== state.targetKey && !stops(d.reply);
  // No requester session to reply in: straight to the announce, as OpenClaw skips the loop.
  if (loop && state.hop < maxHops && (await enqueueStep(svc, state, d.runId, "requester", d.reply, 1))) {
    return { next: "reply-1" };
  }
  // No loop, but a requester that stopped waiting must still get the reply (#36369).
  if (late && !stops(d.reply) && state.requesterKey !== state.targetKey) {
    const entry = await svc.sessions.get(state.requesterKey);
    if (entry) {
      await enqueueTurn(svc, {
        runId: stepRunId(d.runId, "late-reply"),
        sessionKey: state.requesterKey,
        agentId: entry.agentId,
        sessionId: entry.sessionId,
        text: d.reply,
        step: "reply",
        provenance: "inter_session",
        source: { sessionKey: state.targetKey, tool: "sessions_send", runId: d.runId },
        extraSystemPrompt: `Late reply to your sessions_send (run ${d.primaryRunId}) from ${state.targetKey}.`,
        hop: state.hop + 1,
        traceId: state.traceId,
      });
    }
  }
  await enqueueAnnounce(svc, state, d.runId);
  return { next: "announce", lateReplyDelivered: late };
}

/** The side that just replied was `current`. */
async function afterReply({ svc, d, state, maxHops }: StepContext): Promise<Record<string, unknown>> {
  if (!stops(d.reply)) state.latest = d.reply;
  if (stops(d.reply) || state.turn >= state.maxTurns || state.hop >= maxHops) {
    await enqueueAnnounce(svc, state, d.runId);
    return { next: "announce", stoppedBy: stops(d.reply) ? "skip" : state.hop >= maxHops ? "hops" : "turns" };
  }
  const nextSide = d.current === "requester" ? "target" : "requester";
  if (await enqueueStep(svc, state, d.runId, nextSide, d.reply, state.turn + 1))
    return { next: `reply-${state.turn + 1}` };
  await enqueueAnnounce(svc, state, d.runId);
  return { next: "announce", stoppedBy: "missing-session" };
}

async function afterAnnounce({ svc, d, state }: StepContext): Promise<Record<string, unknown>> {
  if (isSilentReply("announce", d.reply)) return { done: "announce-skipped" };
  await deliverAnnounce(svc, state, d.runId, d.reply);
  return { done: "announced" };
}

export function createA2AProcessor(svc: ToolDeps) {
  return async (job: Job, token?: string): Promise<Record<string, unknown>> => {
    if (job.name !== A2A_STEP) throw new Error(`unknown announce job ${job.name}`);
    const data = jobData("a2aStep", job);
    // Everything this flow passes on (reply-back turns, the announce post, a late reply) is the
    // other side's answer cleaned of reasoning and tool scaffolding, and so is what it tests
    // for REPLY_SKIP / ANNOUNCE_SKIP (`<think>…</think>REPLY_SKIP` is a skip).
    const d = { ...data, reply: sanitizeForHandoff(data.reply) };
    // The continuation is added just before the run is finished: act once it is terminal.
    const rec = await svc.runs.get(d.runId);
    if (rec && !isTerminal(rec.status)) {
      // Normally milliseconds (the run finishes right after adding this job); bounded so a run
      // that never finishes cannot keep this job polling forever.
      const waits = (d.terminalWaits ?? 0) + 1;
      if (waits > MAX_TERMINAL_WAITS)
        throw new Error(`run ${d.runId} did not finish within ${MAX_TERMINAL_WAITS} checks`);
      await job.updateData({ ...job.data, terminalWaits: waits });
      return await retryLater(job, token, Math.min(100 * waits, 5000));
    }
    // Only the flow's own state travels on; this job's result fields do not.
    const { runId: _runId, reply: _reply, status: _status, error: _error, terminalWaits: _waits, ...state } = d;

    if (d.status && d.status !== "ok") {
      // A step that failed ends the flow. A requester that stopped waiting for the first run is
      // told, instead of never hearing back.
      const late = d.phase === "after-primary" && (await svc.redis.exists(svc.keys.a2aLate(d.primaryRunId))) === 1;
      if (late) await notifyRequesterOfFailure(svc, state, d);
      return { done: "step-failed", status: d.status, requesterNotified: late };
    }
    return await PHASES[d.phase]({ svc, d, state, maxHops: svc.config.session.agentToAgent.maxHops });
  };
}

async function notifyRequesterOfFailure(svc: ToolDeps, state: A2AState, d: A2AStepData): Promise<void> {
  const entry = await svc.sessions.get(state.requesterKey);
  if (!entry || state.requesterKey === state.targetKey) return;
  await enqueueTurn(svc, {
    runId: stepRunId(d.runId, "failure-notice"),
    sessionKey: state.requesterKey,
    agentId: entry.agentId,
    sessionId: entry.sessionId,
    text: `[sessions_send] Your message to ${state.targetKey} (run ${d.primaryRunId}) ended with status ${d.status}${d.error ? `: ${d.error}` : ""}.`,
    step: "turn",
    provenance: "system",
    hop: state.hop + 1,
    traceId: state.traceId,
  });
}

export function primaryContinuation(
  svc: ToolDeps,
  runId: string,
  state: Omit<A2AState, "phase" | "turn">,
): TurnContinuation {
  return continuation(svc, runId, { ...state, phase: "after-primary", turn: 0 });
}
