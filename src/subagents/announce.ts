/**
 * The durable announce of a finished sub-agent run: a job on the `announce` queue, added by the
 * child's turn (its continuation) once the outcome is saved, with the deterministic id
 * `announce:<childKey>:<runId>`. Every step is idempotent, so BullMQ retries (and a worker
 * killed mid-job) repeat nothing visible:
 *
 *   outcome frozen on the registry record (written once)
 *   → suppressed (steer/kill) or silent (ANNOUNCE_SKIP / NO_REPLY): nothing is said
 *   → the requester session gets an inter-session turn (runId derived: pushed once); a busy
 *     requester runs it right after its current turn, from its inbox
 *   → top-level requester: the normalised block is posted to its channel by this job itself
 *     (delivery id derived, never posted again once delivered), so a channel that keeps
 *     failing fails the announce
 *   → cleanup (delete the child, or keep it) and the registry archive timer.
 * After its last attempt the job stays failed in Bull Board and the run shows `announce: failed`
 * (the requester session has its turn all the same: the result is not lost). It is given up
 * only once a requester that waits for the run (an orchestrator) is released: see giveUp.
 */
import { retryLater } from "../queues/retry-later.js";
import { DelayedError, type Job } from "bullmq";
import type { Config } from "../config/schema.js";
import type { RunDeps } from "../runs/run-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { TranscriptStore } from "../transcript/transcript-store.js";
import { isSilentReply } from "../history/silent-reply.js";
import { sanitizeForHandoff } from "../history/handoff.js";
import { storedRoute } from "../session/stored-route.js";
import { deleteSession } from "../rotation/rotate.js";
import { identOf } from "../session/session-ident.js";
import { JOBS, addJob, continuationOf, jobData, subagentAnnounceJobId } from "../queues/jobs.js";
import { uuidFrom } from "../runs/derived-id.js";
import { enqueueTurn } from "../runs/enqueue.js";
import { SessionNotFoundError } from "../errors/index.js";
import type { TurnContinuation } from "../runs/turn.js";
import { isTerminal } from "../runs/turn.js";
import { isSubagentKey, subagentDepthFromKey } from "../session/key-classify.js";
import { deliverOnce, deliveryAttemptOf, type DeliveryAttempt } from "../delivery/deliver.js";
import { abandonDelivery, DeliveryLaneWait, waitInLane } from "../delivery/delivery-lane.js";
import { DeliveryLog } from "../delivery/delivery-log.js";
import { announceAttemptFailed } from "../metrics/index.js";
import { announceBody, announceTurnText, type AnnounceFacts } from "./announce-format.js";
import { SubagentRegistry, type OwedRelease, type SubagentRun } from "./registry.js";

export const SUBAGENT_ANNOUNCE = JOBS.subagentAnnounce.name;
export const SUBAGENT_ARCHIVE = JOBS.subagentArchive.name;

/** `announce:<childKey>:<runId>` (the id rule of the jobs table). */
export const announceJobId = subagentAnnounceJobId;

/** The runId of the requester's completion turn: one per child run, whatever retries. */
export function announceTurnRunId(childKey: string, runId: string): string {
  return uuidFrom(`announce:${childKey}:${runId}`);
}

/** What the announce and archive jobs use: the registry's Redis, the run and session stores, queues, transcripts. */
export interface SubagentDeps extends Pick<RunDeps, "sessions" | "runs" | "inbox" | "queues"> {
  config: Config;
  redis: RedisClient;
  keys: RedisKeys;
  transcripts: TranscriptStore;
}

export function announceContinuation(
  svc: Pick<SubagentDeps, "config">,
  childKey: string,
  runId: string,
  /** The registry run this turn's outcome is announced for, when it is not `runId` itself (a woken orchestrator). */
  registryRunId?: string,
): TurnContinuation {
  return continuationOf(
    "subagentAnnounce",
    runId,
    { childKey, ...(registryRunId ? { registryRunId } : {}) },
    svc.config,
  );
}

const MAX_TERMINAL_WAITS = 200;

const deliveryLog = (svc: SubagentDeps) => new DeliveryLog(svc.redis, svc.keys);

/** The delivery of the announce of registry run `runId` to its requester's chat. */
export function announceDeliveryId(runId: string): string {
  return `subagent-announce-${runId}`;
}

export function createSubagentProcessors(svc: SubagentDeps) {
  const registry = new SubagentRegistry(svc.redis, svc.keys);

  const announce = async (job: Job, token?: string): Promise<Record<string, unknown>> => {
    const d = jobData("subagentAnnounce", job);
    // The job ends without having posted its announce (its requester went away meanwhile, or it
    // gives up for another reason) after an attempt put it in its chat's lane: its delivery, still
    // pending, is settled so the chat is not held. Nothing when it was posted or never tried.
    // Failing that (Redis), the lane's orphan rule passes it later.
    const leaveLane = async (status: "failed" | "no_route", reason: string) => {
      const id = announceDeliveryId(d.registryRunId ?? d.runId);
      await abandonDelivery(svc, deliveryLog(svc), id, status, reason).catch(() => undefined);
    };
    const rec = await svc.runs.get(d.runId);
    if (rec && !isTerminal(rec.status)) {
      // Added just before the run's finish: normally terminal within milliseconds.
      const waits = (d.terminalWaits ?? 0) + 1;
      if (waits > MAX_TERMINAL_WAITS)
        throw new Error(`run ${d.runId} did not finish within ${MAX_TERMINAL_WAITS} checks`);
      await job.updateData({ ...d, terminalWaits: waits });
      return await retryLater(job, token, Math.min(100 * waits, 5000));
    }
    // A claim of an orchestrator's report by a turn of its session, announced for its own run.
    const run = await registry.get(d.registryRunId ?? d.runId);
    if (!run) {
      // A completion turn's claim for a report nobody waits for any more: what it owed is settled.
      if (d.registryRunId) await registry.settleCompletion(d.childKey, d.runId);
      await leaveLane("no_route", "the announce ended without posting");
      return { done: "unknown-run" };
    }
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const attempt = deliveryAttemptOf(job, "announce");
    try {
      const done = await announceRun(svc, registry, run, rec, attempt, d.runId);
      await leaveLane("no_route", "the announce ended without posting");
      return done;
    } catch (err) {
      // Its post waits behind an earlier message to the same chat: back later, no attempt counted.
      if (err instanceof DeliveryLaneWait) {
        const waits = d.laneWaits ?? 0;
        await job.updateData({ ...d, laneWaits: waits + 1 });
        return await waitInLane(job, token, err, waits);
      }
      if (!lastAttempt) {
        announceAttemptFailed(false);
        throw err;
      }
      await leaveLane("failed", (err as Error).message);
      return await giveUp(svc, registry, run, job, token, err as Error);
    }
  };

  const archive = async (job: Job): Promise<Record<string, unknown>> => {
    const run = await registry.get(jobData("subagentArchive", job).runId);
    if (run) await registry.archive(run);
    return { archived: Boolean(run) };
  };

  return { announce, archive, registry };
}

/** The longest a last attempt whose give-up could not be done waits before it comes back. */
const GIVE_UP_RETRY_MAX_MS = 60_000;

/**
 * The last attempt failed: a requester that waits for this run to report (an orchestrator) is
 * released, then the run is marked `failed` and the job fails for good with `err`.
 *
 * The job is failed only after the release is done, because nothing would do it afterwards: a
 * failed job is never run again, and no other record says a release is owed. So when Redis fails
 * the release (or the mark), the job is not failed but comes back later without counting an
 * attempt (retryLater), and its last attempt runs again whole: every step is idempotent, and the
 * announce itself may get through this time. When Redis fails that move too, the job is left
 * active without its lock being renewed: once the lock expires, BullMQ's stalled-job check puts
 * it back (as after a crash of this worker, which the same check covers). Throwing the Redis
 * error instead would not do: BullMQ retries the move to `failed` until Redis answers again, and
 * the release would be lost.
 */
async function giveUp(
  svc: SubagentDeps,
  registry: SubagentRegistry,
  run: SubagentRun,
  job: Job,
  token: string | undefined,
  err: Error,
): Promise<never> {
  try {
    await releaseRequester(svc, registry, run);
    await registry.update(run.runId, { announce: "failed", announceError: err.message });
  } catch {
    announceAttemptFailed(false);
    const backoff = svc.config.agents.defaults.subagents.announceBackoffMs * 2 ** Math.min(job.attemptsMade, 16);
    try {
      return await retryLater(job, token, Math.min(backoff, GIVE_UP_RETRY_MAX_MS));
    } catch (moveErr) {
      if (moveErr instanceof DelayedError) throw moveErr;
      throw new DelayedError();
    }
  }
  announceAttemptFailed(true);
  throw err;
}

async function announceRun(
  svc: SubagentDeps,
  registry: SubagentRegistry,
  read: Awaited<ReturnType<SubagentRegistry["get"]>> & object,
  claimerRecord: Awaited<ReturnType<SubagentDeps["runs"]["get"]>>,
  attempt: DeliveryAttempt,
  claimer: string,
): Promise<Record<string, unknown>> {
  let run = read;
  let rec = claimerRecord;
  // Its own turns, for the report's stats: the run's own, and every turn that claimed it.
  let turns = [claimer];
  // An orchestrator reports after what it spawned: its own announce and the one each completion
  // turn in its session carries claim it, and the first to find nothing left pending announces
  // it, on its latest answer (OpenClaw defers likewise). A killed or steered run has nothing to wait for.
  if (!run.suppressAnnounce) {
    // A completion turn's claim settles the completion it was (marked when its sub-agent ended).
    const claim = await registry.claimAnnounce(run, claimer, outcomeOrder(rec), claimer);
    // Killed (or steered) after the record was read above, before any claim won: the kill said
    // "killed", so the run ends unannounced as below.
    if (claim.result === "suppressed")
      run = { ...run, ...(await registry.get(run.runId)), suppressAnnounce: claim.reason };
    else if (claim.result !== "claimed") return { done: claim.result };
    else {
      if (claim.outcome !== claimer) rec = await svc.runs.get(claim.outcome);
      turns = claim.turns;
    }
  }
  // Killed or steered: it ends on its own outcome, whoever asks (its own announce job, or a
  // claim a completion turn dropped by the kill still carried: the run's own job may have
  // deferred already, and would not come again).
  if (run.suppressAnnounce && claimer !== run.runId) {
    // A completion turn's claim: what it owed the session is settled all the same, or the run
    // that replaced a steered one there would wait for it for ever.
    await registry.settleCompletion(run.childSessionKey, claimer);
    rec = await svc.runs.get(run.runId);
    turns = [run.runId];
  }
  // The outcome comes from the run record (the runtime), never from what the model wrote.
  const status = (rec && isTerminal(rec.status) ? rec.status : "error") as AnnounceFacts["status"];
  const error = rec?.error ?? (rec ? undefined : "run record expired");
  const endedAt = rec?.endedAt ?? Date.now();
  const span = await spanOf(svc, run.runId, rec, turns);
  // Frozen as it will be handed on: no reasoning or tool scaffolding reaches the requester or its chat.
  await registry.setOnce(run.runId, "frozenResult", status === "ok" ? sanitizeForHandoff(rec?.reply) : "");
  // The requester's own run when the requester is a sub-agent: its report may wait for this one,
  // so the completion this run owes it is marked pending in the same step that ends this run.
  const parentRun = isSubagentKey(run.requesterSessionKey)
    ? ((await registry.currentRunOf(run.requesterSessionKey)) ?? undefined)
    : undefined;
  const completion = announceTurnRunId(run.childSessionKey, run.runId);
  await registry.markEnded(run, status, endedAt, error, parentRun ? completion : undefined);
  const done = await announceEnded(svc, registry, run, status, endedAt, error, span, parentRun, attempt);
  if (done.done === "restored") {
    // No longer suppressed (see announceEnded): announced on the record as it is now (as if it
    // never was suppressed, unless a kill has suppressed it since). Each pass here needs a drop.
    const again = await registry.get(run.runId);
    if (!again) return { done: "unknown-run" };
    return await announceRun(svc, registry, again, claimerRecord, attempt, claimer);
  }
  // No completion turn carries the parent's claim (this one was silent, suppressed, or its
  // requester is gone): the completion is settled here instead, and a parent already waiting
  // is asked to claim again.
  if (parentRun && done.done !== "announced") await settleAndWake(svc, registry, run, parentRun);
  return done;
}

/**
 * The completion `run` owed its requester will not come: settle it, then ask a requester whose
 * report waits (deferred) to claim again. In this order: a claim that ran before the settle saw
 * the completion pending and deferred, so it is seen here; one that runs after sees it settled.
 * Its own claimer is the requester's run, announced on its latest answer (subagent-claim.lua).
 */
async function settleAndWake(
  svc: Pick<SubagentDeps, "queues" | "config">,
  registry: SubagentRegistry,
  run: OwedRelease,
  parentRun: string,
): Promise<void> {
  await registry.settleCompletion(
    run.requesterSessionKey,
    announceTurnRunId(run.childSessionKey, run.runId),
    run.runId,
  );
  if ((await registry.get(parentRun))?.announce !== "deferred") return;
  // Its id is derived from the runs it names: a release done again (the sweep after a crash, or
  // racing a slow caller) adds no second job while the first is kept, and a claim made again by
  // the same claimer is answered as the first was (subagent-claim.lua), its steps idempotent.
  await addJob(svc, "subagentAnnounce", {
    childKey: run.requesterSessionKey,
    runId: parentRun,
    registryRunId: parentRun,
    via: run.runId,
    status: "ok",
  });
}

/**
 * A run whose completion will not come, the requester that waits for it released as for a silent
 * run: its announce given up after its last attempt (unless its completion turn was queued: its
 * claim settles what it owed), or a run whose turn was never queued, ended by a kill or dropped
 * (src/subagents/unqueued.ts): it left the requester's running set without an announce.
 *
 * Idempotent (a settle removes set members; the wake job's id is derived), so it may be done
 * again: the step that ends or drops an unqueued run records the release as owed
 * (subagent-unqueued.lua), and it is forgotten here only once done, so that a caller cut off
 * before the end of this leaves it to the maintenance sweep (releaseOwed), not to nobody.
 */
export async function releaseRequester(
  svc: Pick<SubagentDeps, "runs" | "queues" | "config">,
  registry: SubagentRegistry,
  run: OwedRelease,
): Promise<void> {
  // A steer's run dropped (cut off before its push) gave the run it replaced back its place, that
  // run's announce already suppressed: it is announced by a new job (its id names the dropped
  // run, so a release done again adds none). Owed for any requester (subagent-unqueued.lua).
  const restored = await registry.reannounceOf(run.childSessionKey, run.runId);
  if (restored)
    await addJob(svc, "subagentAnnounce", { childKey: run.childSessionKey, runId: restored, via: run.runId });
  if (isSubagentKey(run.requesterSessionKey)) {
    const parentRun = await registry.currentRunOf(run.requesterSessionKey);
    if (parentRun && !(await svc.runs.get(announceTurnRunId(run.childSessionKey, run.runId))))
      await settleAndWake(svc, registry, run, parentRun);
  }
  await registry.releaseDone(run);
}

type RunRecordOf = Awaited<ReturnType<SubagentDeps["runs"]["get"]>>;

/**
 * Which of an orchestrator's turns answered last (subagent-claim.lua compares these as strings):
 * a turn that ended by sessions_yield handed over to its sub-agents, so it ranks below any turn
 * that answered; then the end on Redis's clock (turns of one session run one after another),
 * then the start.
 */
export function outcomeOrder(rec: RunRecordOf): string {
  const pad = (n: number | undefined) => String(Math.max(0, Math.floor(n ?? 0))).padStart(15, "0");
  const answered = rec && rec.yielded === undefined ? 1 : 0;
  return `${answered}:${pad(rec?.terminalAt ?? rec?.endedAt)}:${pad(rec?.startedAt)}`;
}

/**
 * What the report's stats cover: from the run's own start, and the usage of every turn of it
 * (for an orchestrator, its own run and each completion turn that claimed its report; OpenClaw
 * counts the child session's tokens likewise).
 */
async function spanOf(
  svc: SubagentDeps,
  ownRunId: string,
  outcome: RunRecordOf,
  turns: string[],
): Promise<{ startedAt?: number; usage?: { input: number; output: number } }> {
  const ids = [...new Set([ownRunId, ...turns])];
  const recs = await Promise.all(ids.map((id) => (id === outcome?.runId ? outcome : svc.runs.get(id))));
  const own = recs[0];
  let usage: { input: number; output: number } | undefined;
  for (const r of recs)
    if (r?.usage) usage = { input: (usage?.input ?? 0) + r.usage.input, output: (usage?.output ?? 0) + r.usage.output };
  const startedAt = own?.startedAt ?? outcome?.startedAt;
  return { ...(startedAt !== undefined ? { startedAt } : {}), ...(usage ? { usage } : {}) };
}

async function announceEnded(
  svc: SubagentDeps,
  registry: SubagentRegistry,
  run: SubagentRun,
  status: AnnounceFacts["status"],
  endedAt: number,
  error: string | undefined,
  /** The run's start and its turns' usage (spanOf). */
  span: { startedAt?: number; usage?: { input: number; output: number } },
  /** The requester's own registry run (a sub-agent requester): the completion turn carries its claim. */
  parentRun: string | undefined,
  attempt: DeliveryAttempt,
): Promise<Record<string, unknown>> {
  if (span.usage) await registry.update(run.runId, { usageInput: span.usage.input, usageOutput: span.usage.output });
  if (span.startedAt) await registry.update(run.runId, { startedAt: span.startedAt });
  const frozen = (await registry.get(run.runId))?.frozenResult ?? "";

  if (run.suppressAnnounce) {
    // Only while still suppressed: a steer cut off before its push may have been undone meanwhile
    // (its run dropped, this one given back its announce: subagent-unqueued.lua).
    if (!(await registry.markSuppressed(run.runId))) return { done: "restored" };
    // A steered run's child session lives on in the run that replaced it.
    if (!run.replacedBy) await cleanup(svc, run);
    return { done: "suppressed", reason: run.suppressAnnounce };
  }
  if (status === "ok" && isSilentReply("subagent-announce", frozen)) {
    await registry.update(run.runId, { announce: "skipped" });
    await cleanup(svc, run);
    return { done: "silent" };
  }

  const requesterGone = async (): Promise<Record<string, unknown>> => {
    await registry.update(run.runId, { announce: "failed", announceError: "requester session no longer exists" });
    await cleanup(svc, run);
    return { done: "requester-missing" };
  };
  const requester = await svc.sessions.get(run.requesterSessionKey);
  if (!requester) return await requesterGone();
  const child = await svc.sessions.get(run.childSessionKey);
  const requesterIsSubagent = (requester.spawnDepth ?? subagentDepthFromKey(run.requesterSessionKey)) > 0;
  const facts: AnnounceFacts = {
    run,
    status,
    ...(error ? { error } : {}),
    result: frozen,
    ...(span.startedAt ? { runtimeMs: endedAt - span.startedAt } : {}),
    ...(span.usage ? { usage: span.usage } : {}),
    ...(child
      ? { sessionId: child.sessionId, transcriptPath: svc.transcripts.path(child.agentId, child.sessionId) }
      : {}),
    requesterIsSubagent,
  };

  // A person is behind a top-level requester: the report goes to its chat, once. A nested
  // requester (an orchestrator sub-agent) only gets the internal turn.
  const route = requesterIsSubagent ? undefined : storedRoute(run.requesterSessionKey, requester);
  // The requester session first: its completion turn does not depend on the channel being up.
  // When it is the last sub-agent a deferred orchestrator waited for, that turn's outcome is the
  // orchestrator's own report to its requester.
  const turnRunId = announceTurnRunId(run.childSessionKey, run.runId);
  const pushed = await enqueueTurn(
    svc,
    {
      runId: turnRunId,
      sessionKey: run.requesterSessionKey,
      agentId: requester.agentId,
      sessionId: requester.sessionId,
      text: announceTurnText(facts),
      // An announce step, as a sessions_send's is: what the script runtime's `step` matches.
      step: "announce",
      provenance: "inter_session",
      source: { sessionKey: run.childSessionKey, tool: "subagent_announce", runId: run.runId },
      // One hop after the child's turn (records of the previous release have none: 0, as before).
      ...(run.hop !== undefined ? { hop: run.hop + 1 } : {}),
      ...(route ? { deliver: { ...route, channel: route.channel } } : {}),
      ...(parentRun ? { continuation: announceContinuation(svc, run.requesterSessionKey, turnRunId, parentRun) } : {}),
    },
    // Deleted since the read above: refused, and the requester is gone as if not found above
    // (on any attempt, the last one too: not an announce failure to retry).
    { existed: true },
  ).then(
    () => true,
    (err: unknown) => {
      if (err instanceof SessionNotFoundError) return false;
      throw err;
    },
  );
  if (!pushed) return await requesterGone();
  if (route) {
    // Throws while the channel fails: this job is retried with backoff (announceAttempts).
    const message = announceBody(facts);
    await deliverOnce(
      svc,
      {
        id: announceDeliveryId(run.runId),
        sessionKey: run.requesterSessionKey,
        route,
        message,
        kind: "subagent_announce",
      },
      attempt,
    );
  }
  await registry.update(run.runId, { announce: "delivered" });
  await cleanup(svc, run);
  return { done: "announced", status, posted: Boolean(route) };
}

async function cleanup(
  svc: SubagentDeps,
  run: { runId: string; childSessionKey: string; cleanup: "delete" | "keep" },
): Promise<void> {
  if (run.cleanup === "delete") {
    // Removed first (no new turn can target it), then its transcript archived as `deleted`.
    await deleteSession(svc, run.childSessionKey, identOf(svc.config, run.childSessionKey), { archive: true });
  }
  if (svc.config.agents.defaults.subagents.archiveAfterMinutes > 0)
    await addJob(svc, "subagentArchive", { runId: run.runId });
}
