/**
 * What happens after a sessions_send: the agent-to-agent flow, decided step by step when each
 * run of it finishes (docs/concepts/tools.md, "The agent-to-agent flow"):
 *
 *   target run finishes (phase after-primary)
 *     └─ reply-back loop: turn 1 in the REQUESTER with the target's reply, turn 2 in the target…
 *        up to maxPingPongTurns, stopped early by exactly REPLY_SKIP / NO_REPLY or the hop bound
 *   ─▶ announce turn in the TARGET (phase after-announce)
 *     └─ ANNOUNCE_SKIP (or silence): nothing; anything else: a durable delivery to the target's
 *        channel (stored delivery context, else parsed from its key).
 *
 * `planA2AStep` decides a step: the turns to queue next (runIds derived from the run they
 * follow) and the deliveries to make. The worker that finished the run applies it inline: the
 * deliveries are added (ids derived from the runId) before the finish, and the turns are queued
 * by the finish script itself, in the same atomic step as the run turning terminal
 * (run-finish.lua), so a step is never lost nor doubled, and no job polls for the run to end.
 * A requester whose wait timed out still gets the reply: that turn is queued only if the late
 * flag exists at the finish, which the caller sets atomically against the run turning terminal.
 *
 * Two requesters never get turns from the flow: the target itself (a self-send: no reply-back,
 * no late reply and no announce, which would only post the session's reaction to its own note
 * to its live channel, OpenClaw #122709) and a cron session (its run is not a conversation; the
 * target's reply fed back to it starts a loop, OpenClaw #92257: the announce still happens).
 *
 * `a2a.step` jobs on the announce queue remain for what has no finishing worker: turns dropped
 * by `/stop` (their flow learns they were killed) and steps added by workers of the previous
 * release during a rolling restart. Their processor applies the same plan once the run is terminal.
 */
import { retryLater } from "../queues/retry-later.js";
import type { Job } from "bullmq";
import type { ToolDeps } from "./tool-deps.js";
import { isSilentReply } from "../history/silent-reply.js";
import { sanitizeForHandoff } from "../history/handoff.js";
import { enqueueTurn } from "../runs/enqueue.js";
import { isTerminal, type Turn } from "../runs/turn.js";
import { storedRoute } from "../session/stored-route.js";
import { restSegments } from "../session/key-classify.js";
import { enqueueOrSettleDelivery } from "../delivery/deliver.js";
import { uuidFrom } from "../runs/derived-id.js";
import type { KnownEntry } from "../runs/entry-cache.js";
import type { ExpectedEntry } from "../runs/run-records.js";
import type { SessionEntry } from "../session/session-entry.js";
import { ANNOUNCE_MESSAGE, announceContext, replyContext } from "./a2a-prompts.js";
import { JOBS, continuationOf, jobData, type A2AState, type A2AStepData, type DeliverData } from "../queues/jobs.js";
import type { TurnContinuation } from "../runs/turn.js";

/** The flow's state, carried from step to step; its schema is in the jobs table. */
export type { A2AState } from "../queues/jobs.js";

/** About 15 minutes of backing-off checks for the followed run to become terminal. */
const MAX_TERMINAL_WAITS = 200;

export const A2A_STEP = JOBS.a2aStep.name;

/** What deciding a step needs: the flow's limits and the late flag's key. */
type FlowDeps = Pick<ToolDeps, "config" | "keys">;

/** How a step reads a session entry: its exact stored JSON and the decoded entry, or null (no session). */
export type EntryReader = (sessionKey: string) => Promise<KnownEntry | null>;

/**
 * One thing a step does: queue a turn (`ifExists`: only if that key exists at the finish), or
 * deliver (`entry`: the session's entry, on which a delivery with nothing to send is settled).
 */
export type FlowEffect = { push: Turn; ifExists?: string } | { deliver: DeliverData; entry: SessionEntry | null };

export interface FlowPlan {
  effects: FlowEffect[];
  /** What the step decided, for operators: on the finished run's record (`a2a`) or the job's result. */
  result: Record<string, unknown>;
  /** The session entries it was decided on (checked again by the finish that applies it). */
  entries: ExpectedEntry[];
}

/** The step data of a turn whose continuation is an agent-to-agent step, with that run's outcome. */
export function a2aStepOf(
  continuation: TurnContinuation | undefined,
  runId: string,
  outcome: { status: A2AStepData["status"]; reply?: string; error?: string },
): A2AStepData | null {
  if (continuation?.name !== A2A_STEP) return null;
  const data = {
    ...continuation.data,
    runId,
    reply: outcome.reply ?? "",
    status: outcome.status,
    ...(outcome.error ? { error: outcome.error } : {}),
  };
  const parsed = JOBS.a2aStep.data.safeParse(data);
  if (!parsed.success) throw new Error(`invalid agent-to-agent step data on run ${runId}: ${parsed.error.message}`);
  return parsed.data;
}

/** The step job that follows the turn `runId` (filled in with its outcome when it has one). */
function continuation(svc: FlowDeps, runId: string, state: A2AState): TurnContinuation {
  return continuationOf("a2aStep", runId, state, svc.config);
}

/**
 * A cron session (`cron:<job>` or an isolated run `cron:<job>:run:<id>`, agent-prefixed or not).
 * As a sessions_send requester it gets no reply-back turns, no late reply, no failure notice.
 */
export function isCronSessionKey(key: string): boolean {
  return restSegments(key.toLowerCase())[0] === "cron";
}

/** Whether the flow may queue turns in the requester's session (not itself, not a cron run). */
function requesterTakesTurns(state: A2AState): boolean {
  return state.requesterKey !== state.targetKey && !isCronSessionKey(state.requesterKey);
}

/** A reply that ends the ping-pong (silence, REPLY_SKIP, NO_REPLY). */
function stops(reply: string | undefined): boolean {
  return isSilentReply("reply-back", reply);
}

/**
 * Step turns get runIds derived from the run they follow, so deciding a step again (a re-run
 * after a crash, a retried job) queues nothing new: a runId that exists is not queued twice.
 */
function stepRunId(afterRunId: string, kind: string): string {
  return uuidFrom(`a2a:${afterRunId}:${kind}`);
}

/** A turn of the flow in the session `entry` (fixed sessionId, as every queued turn). */
function stepTurn(
  entry: SessionEntry,
  sessionKey: string,
  t: Omit<Turn, "sessionKey" | "agentId" | "sessionId" | "enqueuedAt" | "messageTs">,
): Turn {
  const now = Date.now();
  return { ...t, sessionKey, agentId: entry.agentId, sessionId: entry.sessionId, enqueuedAt: now, messageTs: now };
}

/** What a phase handler gets: the step's data (reply cleaned for hand-off), the flow's state, how to read entries. */
interface StepContext {
  svc: FlowDeps;
  d: A2AStepData;
  state: A2AState;
  maxHops: number;
  read: EntryReader;
}

type Decided = { effects: FlowEffect[]; result: Record<string, unknown> };

/** Reply-back turn `turnNo` in `to`'s session, or null when that side has no session (no step). */
async function replyStep(
  { svc, state, read }: StepContext,
  afterRunId: string,
  to: "requester" | "target",
  text: string,
  turnNo: number,
): Promise<FlowEffect | null> {
  const toKey = to === "requester" ? state.requesterKey : state.targetKey;
  const fromKey = to === "requester" ? state.targetKey : state.requesterKey;
  const known = await read(toKey);
  if (!known) return null;
  const runId = stepRunId(afterRunId, `reply-${turnNo}`);
  const turn = stepTurn(known.entry, toKey, {
    runId,
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
  return { push: turn };
}

/** The announce turn in the target, or nothing when the target has no session. */
async function announceStep({ svc, state, read }: StepContext, afterRunId: string): Promise<FlowEffect[]> {
  const known = await read(state.targetKey);
  if (!known) return [];
  const runId = stepRunId(afterRunId, "announce");
  const turn = stepTurn(known.entry, state.targetKey, {
    runId,
    text: ANNOUNCE_MESSAGE,
    step: "announce",
    provenance: "inter_session",
    source: { sessionKey: state.requesterKey, tool: "sessions_send", runId: afterRunId },
    extraSystemPrompt: announceContext(state, state.original, state.round1, state.latest),
    hop: state.hop + 1,
    traceId: state.traceId,
    continuation: continuation(svc, runId, { ...state, phase: "after-announce", hop: state.hop + 1 }),
  });
  return [{ push: turn }];
}

/**
 * The flow as a phase table: the handler of the phase a finished run followed decides the next
 * step (when that run ended `ok`; a failed run ends the flow, see planA2AStep).
 *
 * | phase          | the run it follows                  | next                                            |
 * |----------------|-------------------------------------|-------------------------------------------------|
 * | after-primary  | the target's turn with the message  | reply-back turn 1 in the requester, else (late  |
 * |                |                                     | requester) the late reply; then the announce.   |
 * |                |                                     | Nothing at all after a self-send                |
 * | after-reply    | a reply-back turn (`current` side)  | the other side's turn, or the announce once a   |
 * |                |                                     | side stops, or turns / hops run out             |
 * | after-announce | the target's announce turn          | a delivery to the target's channel, unless silent|
 */
const PHASES: Record<A2AState["phase"], (c: StepContext) => Promise<Decided>> = {
  "after-primary": afterPrimary,
  "after-reply": afterReply,
  "after-announce": afterAnnounce,
};

async function afterPrimary(c: StepContext): Promise<Decided> {
  const { svc, d, state, maxHops, read } = c;
  state.round1 = d.reply;
  state.latest = d.reply;
  // A session that wrote to itself has its answer in its own transcript already: nothing follows.
  if (state.requesterKey === state.targetKey) return { effects: [], result: { done: "self-send" } };
  const turns = requesterTakesTurns(state);
  const loop = state.maxTurns > 0 && turns && !stops(d.reply);
  // No requester session to reply in: straight to the announce, as OpenClaw skips the loop.
  if (loop && state.hop < maxHops) {
    const step = await replyStep(c, d.runId, "requester", d.reply, 1);
    if (step) return { effects: [step], result: { next: "reply-1" } };
  }
  const effects: FlowEffect[] = [];
  // No loop, but a requester that stopped waiting must still get the reply (#36369): queued only
  // if its late flag is there when this run turns terminal.
  if (!stops(d.reply) && turns) {
    const known = await read(state.requesterKey);
    if (known) {
      const turn = stepTurn(known.entry, state.requesterKey, {
        runId: stepRunId(d.runId, "late-reply"),
        text: d.reply,
        step: "reply",
        provenance: "inter_session",
        source: { sessionKey: state.targetKey, tool: "sessions_send", runId: d.runId },
        extraSystemPrompt: `Late reply to your sessions_send (run ${d.primaryRunId}) from ${state.targetKey}.`,
        hop: state.hop + 1,
        traceId: state.traceId,
      });
      effects.push({ push: turn, ifExists: svc.keys.a2aLate(d.primaryRunId) });
    }
  }
  effects.push(...(await announceStep(c, d.runId)));
  return { effects, result: { next: "announce", lateReply: effects.length > 1 ? "if-late" : "none" } };
}

/** The side that just replied was `current`. */
async function afterReply(c: StepContext): Promise<Decided> {
  const { d, state, maxHops } = c;
  if (!stops(d.reply)) state.latest = d.reply;
  if (stops(d.reply) || state.turn >= state.maxTurns || state.hop >= maxHops) {
    return {
      effects: await announceStep(c, d.runId),
      result: { next: "announce", stoppedBy: stops(d.reply) ? "skip" : state.hop >= maxHops ? "hops" : "turns" },
    };
  }
  const nextSide = d.current === "requester" ? "target" : "requester";
  const step = await replyStep(c, d.runId, nextSide, d.reply, state.turn + 1);
  if (step) return { effects: [step], result: { next: `reply-${state.turn + 1}` } };
  return { effects: await announceStep(c, d.runId), result: { next: "announce", stoppedBy: "missing-session" } };
}

async function afterAnnounce({ state, d, read }: StepContext): Promise<Decided> {
  if (isSilentReply("announce", d.reply)) return { effects: [], result: { done: "announce-skipped" } };
  // An announce step of a self-send queued by an earlier release: its echo is not posted either.
  if (state.requesterKey === state.targetKey) return { effects: [], result: { done: "self-send" } };
  const known = await read(state.targetKey);
  // No route at all is still recorded (as no_route on the "none" channel), never dropped.
  const route = storedRoute(state.targetKey, known?.entry ?? null) ?? { channel: "none" };
  const deliver: DeliverData = {
    id: `announce-${d.runId}`,
    sessionKey: state.targetKey,
    route,
    message: d.reply.trim(),
    kind: "announce",
  };
  return { effects: [{ deliver, entry: known?.entry ?? null }], result: { done: "announced" } };
}

/** A step that failed ends the flow; a requester that stopped waiting for the first run is told (if late). */
async function afterFailure({ svc, d, state, read }: StepContext): Promise<Decided> {
  const result = { done: "step-failed", status: d.status };
  if (d.phase !== "after-primary" || !requesterTakesTurns(state)) return { effects: [], result };
  const known = await read(state.requesterKey);
  if (!known) return { effects: [], result };
  const turn = stepTurn(known.entry, state.requesterKey, {
    runId: stepRunId(d.runId, "failure-notice"),
    text:
      `[sessions_send] Your message to ${state.targetKey} (run ${d.primaryRunId}) ended with status ` +
      `${d.status}${d.error ? `: ${d.error}` : ""}.`,
    step: "turn",
    provenance: "system",
    hop: state.hop + 1,
    traceId: state.traceId,
  });
  return { effects: [{ push: turn, ifExists: svc.keys.a2aLate(d.primaryRunId) }], result };
}

/**
 * Decide the step that follows the run `data.runId` (its outcome is in `data`): the turns to
 * queue and deliveries to make, and the session entries that decision read. Pure apart from
 * those reads, so it can be decided again (a re-run, a changed entry) with the same runIds.
 */
export async function planA2AStep(svc: FlowDeps, data: A2AStepData, read: EntryReader): Promise<FlowPlan> {
  // Everything this flow passes on (reply-back turns, the announce post, a late reply) is the
  // other side's answer cleaned of reasoning and tool scaffolding, and so is what it tests
  // for REPLY_SKIP / ANNOUNCE_SKIP (`<think>…</think>REPLY_SKIP` is a skip).
  const d = { ...data, reply: sanitizeForHandoff(data.reply) };
  // Only the flow's own state travels on; this step's result fields do not.
  const { runId: _runId, reply: _reply, status: _status, error: _error, terminalWaits: _waits, ...state } = d;
  const entries = new Map<string, string | null>();
  const recordingRead: EntryReader = async (key) => {
    const known = await read(key);
    if (!entries.has(key)) entries.set(key, known?.raw ?? null);
    return known;
  };
  const c: StepContext = { svc, d, state, maxHops: svc.config.session.agentToAgent.maxHops, read: recordingRead };
  const decided = d.status && d.status !== "ok" ? await afterFailure(c) : await PHASES[d.phase](c);
  return { ...decided, entries: [...entries].map(([sessionKey, raw]) => ({ sessionKey, raw })) };
}

/**
 * The `a2a.step` job: a step with no finishing worker to apply it inline (a turn dropped by
 * `/stop`, a step added by a worker of the previous release). It waits for the run to be
 * terminal, then applies the same plan one effect at a time; each is idempotent (derived runIds
 * and delivery ids), so a retried job repeats nothing.
 */
export function createA2AProcessor(svc: ToolDeps) {
  return async (job: Job, token?: string): Promise<Record<string, unknown>> => {
    if (job.name !== A2A_STEP) throw new Error(`unknown announce job ${job.name}`);
    const d = jobData("a2aStep", job);
    const rec = await svc.runs.get(d.runId);
    if (rec && !isTerminal(rec.status)) {
      // Only a previous release adds this job before the run finishes; bounded so a run that
      // never finishes cannot keep this job polling forever.
      const waits = (d.terminalWaits ?? 0) + 1;
      if (waits > MAX_TERMINAL_WAITS)
        throw new Error(`run ${d.runId} did not finish within ${MAX_TERMINAL_WAITS} checks`);
      await job.updateData({ ...job.data, terminalWaits: waits });
      return await retryLater(job, token, Math.min(100 * waits, 5000));
    }
    const plan = await planA2AStep(svc, d, (key) => svc.sessions.getKnown(key));
    for (const e of plan.effects) {
      if ("deliver" in e) await enqueueOrSettleDelivery(svc, e.deliver, e.entry);
      // The run is terminal: whether its caller stopped waiting is settled, so the flag is read.
      // Each push was planned on the entry just read: a session deleted since is refused, and the
      // job's retry plans again without it.
      else if (!e.ifExists || (await svc.redis.exists(e.ifExists)) === 1)
        await enqueueTurn(svc, e.push, { existed: true });
    }
    return plan.result;
  };
}

export function primaryContinuation(
  svc: FlowDeps,
  runId: string,
  state: Omit<A2AState, "phase" | "turn">,
): TurnContinuation {
  return continuation(svc, runId, { ...state, phase: "after-primary", turn: 0 });
}
