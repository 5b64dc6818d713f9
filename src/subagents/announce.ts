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
 * (the requester session has its turn all the same: the result is not lost).
 */
import { retryLater } from "../queues/retry-later.js";
import type { Job } from "bullmq";
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
import type { TurnContinuation } from "../runs/turn.js";
import { isTerminal } from "../runs/turn.js";
import { isSubagentKey, subagentDepthFromKey } from "../session/key-classify.js";
import { deliverOnce } from "../delivery/deliver.js";
import { announceAttemptFailed } from "../metrics/index.js";
import { announceBody, announceTurnText, type AnnounceFacts } from "./announce-format.js";
import { SubagentRegistry, type SubagentRun } from "./registry.js";

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

export function createSubagentProcessors(svc: SubagentDeps) {
  const registry = new SubagentRegistry(svc.redis, svc.keys);

  const announce = async (job: Job, token?: string): Promise<Record<string, unknown>> => {
    const d = jobData("subagentAnnounce", job);
    const rec = await svc.runs.get(d.runId);
    if (rec && !isTerminal(rec.status)) {
      // Added just before the run's finish: normally terminal within milliseconds.
      const waits = (d.terminalWaits ?? 0) + 1;
      if (waits > MAX_TERMINAL_WAITS)
        throw new Error(`run ${d.runId} did not finish within ${MAX_TERMINAL_WAITS} checks`);
      await job.updateData({ ...d, terminalWaits: waits });
      return await retryLater(job, token, Math.min(100 * waits, 5000));
    }
    // A woken orchestrator: the outcome is its session's latest turn's, announced for its own run.
    const run = await registry.get(d.registryRunId ?? d.runId);
    if (!run) return { done: "unknown-run" };
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    try {
      return await announceRun(svc, registry, run, rec, lastAttempt, d.runId);
    } catch (err) {
      announceAttemptFailed(lastAttempt);
      if (lastAttempt) {
        await registry.update(run.runId, { announce: "failed", announceError: (err as Error).message });
      }
      throw err;
    }
  };

  const archive = async (job: Job): Promise<Record<string, unknown>> => {
    const run = await registry.get(jobData("subagentArchive", job).runId);
    if (run) await registry.archive(run);
    return { archived: Boolean(run) };
  };

  return { announce, archive, registry };
}

async function announceRun(
  svc: SubagentDeps,
  registry: SubagentRegistry,
  run: Awaited<ReturnType<SubagentRegistry["get"]>> & object,
  claimerRecord: Awaited<ReturnType<SubagentDeps["runs"]["get"]>>,
  lastAttempt: boolean,
  claimer: string,
): Promise<Record<string, unknown>> {
  let rec = claimerRecord;
  // An orchestrator reports after what it spawned: its own announce and the one each completion
  // turn in its session carries claim it, and the first to find nothing left pending announces
  // it, on its outcome (OpenClaw defers likewise). A killed or steered run has nothing to wait for.
  if (run.suppressAnnounce) {
    // Killed or steered: it ends on its own outcome, whoever asks (its own announce job, or a
    // claim a completion turn dropped by the kill still carried: the run's own job may have
    // deferred already, and would not come again).
    if (claimer !== run.runId) rec = await svc.runs.get(run.runId);
  } else {
    const claim = await registry.claimAnnounce(run, claimer);
    if (claim !== "claimed") return { done: claim };
  }
  // The outcome comes from the run record (the runtime), never from what the model wrote.
  const status = (rec && isTerminal(rec.status) ? rec.status : "error") as AnnounceFacts["status"];
  const error = rec?.error ?? (rec ? undefined : "run record expired");
  const endedAt = rec?.endedAt ?? Date.now();
  // Frozen as it will be handed on: no reasoning or tool scaffolding reaches the requester or its chat.
  await registry.setOnce(run.runId, "frozenResult", status === "ok" ? sanitizeForHandoff(rec?.reply) : "");
  await registry.markEnded(run, status, endedAt, error);
  // The requester's own run when the requester is a sub-agent: its report may wait for this one.
  const parentRun = isSubagentKey(run.requesterSessionKey)
    ? ((await registry.currentRunOf(run.requesterSessionKey)) ?? undefined)
    : undefined;
  const done = await announceEnded(svc, registry, run, rec, status, endedAt, error, parentRun, lastAttempt);
  // No completion turn carries the parent's claim (this one was silent, suppressed, or its
  // requester is gone): a parent already waiting claims on its own outcome.
  if (parentRun && done.done !== "announced" && (await registry.get(parentRun))?.announce === "deferred")
    await addJob(svc, "subagentAnnounce", {
      childKey: run.requesterSessionKey,
      runId: parentRun,
      registryRunId: parentRun,
      via: run.runId,
      status: "ok",
    } as never);
  return done;
}

async function announceEnded(
  svc: SubagentDeps,
  registry: SubagentRegistry,
  run: SubagentRun,
  rec: Awaited<ReturnType<SubagentDeps["runs"]["get"]>>,
  status: AnnounceFacts["status"],
  endedAt: number,
  error: string | undefined,
  /** The requester's own registry run (a sub-agent requester): the completion turn carries its claim. */
  parentRun: string | undefined,
  lastAttempt: boolean,
): Promise<Record<string, unknown>> {
  if (rec?.usage) await registry.update(run.runId, { usageInput: rec.usage.input, usageOutput: rec.usage.output });
  if (rec?.startedAt) await registry.update(run.runId, { startedAt: rec.startedAt });
  const frozen = (await registry.get(run.runId))?.frozenResult ?? "";

  if (run.suppressAnnounce) {
    await registry.update(run.runId, { announce: "suppressed" });
    // A steered run's child session lives on in the run that replaced it.
    if (!run.replacedBy) await cleanup(svc, run);
    return { done: "suppressed", reason: run.suppressAnnounce };
  }
  if (status === "ok" && isSilentReply("subagent-announce", frozen)) {
    await registry.update(run.runId, { announce: "skipped" });
    await cleanup(svc, run);
    return { done: "silent" };
  }

  const requester = await svc.sessions.get(run.requesterSessionKey);
  if (!requester) {
    await registry.update(run.runId, { announce: "failed", announceError: "requester session no longer exists" });
    await cleanup(svc, run);
    return { done: "requester-missing" };
  }
  const child = await svc.sessions.get(run.childSessionKey);
  const requesterIsSubagent = (requester.spawnDepth ?? subagentDepthFromKey(run.requesterSessionKey)) > 0;
  const facts: AnnounceFacts = {
    run,
    status,
    ...(error ? { error } : {}),
    result: frozen,
    ...(rec?.startedAt ? { runtimeMs: endedAt - rec.startedAt } : {}),
    ...(rec?.usage ? { usage: rec.usage } : {}),
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
  await enqueueTurn(svc, {
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
  });
  if (route) {
    // Throws while the channel fails: this job is retried with backoff (announceAttempts).
    const message = announceBody(facts);
    await deliverOnce(
      svc,
      {
        id: `subagent-announce-${run.runId}`,
        sessionKey: run.requesterSessionKey,
        route,
        message,
        kind: "subagent_announce",
      },
      lastAttempt,
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
