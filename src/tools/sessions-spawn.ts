/**
 * sessions_spawn: start a sub-agent session for a background task and answer at once with
 * `{status:"accepted", runId, childSessionKey}`. The checks run in OpenClaw's order with its
 * texts (docs/concepts/subagents.md); the child's lineage is written once when its session is
 * created; the child's turn carries the continuation that becomes its durable announce.
 */
import { transcriptTopicOf } from "../session/transcript-topic.js";
import type { ToolDeps } from "./tool-deps.js";
import { isAgentSandboxed } from "../config/agents.js";
import { doorLimit, enqueueTurn } from "../runs/enqueue.js";
import { QueueFullError } from "../errors/queue-full.js";
import { stopRun } from "../runs/stop.js";
import { toolCallIds } from "./call-ids.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { subagentSessionKey } from "../session/key-build.js";
import { subagentDepthFromKey } from "../session/key-classify.js";
import type { TranscriptEntry } from "../history/transcript-types.js";
import { announceContinuation } from "../subagents/announce.js";
import { SubagentRegistry, type SubagentRun } from "../subagents/registry.js";
import { dropUnqueued, releaseUnqueued } from "../subagents/unqueued.js";
import * as rules from "../subagents/spawn-policy.js";
import { SessionsSpawnArgs } from "./schemas.js";
import { argsError, forbidden, toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

/** How much of the requester's transcript a fork copies. */
const FORK_MAX_ENTRIES = 500;

export async function sessionsSpawn(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const raw = (rawArgs ?? {}) as Record<string, unknown>;
  // Delivery targets are refused by name before anything else (the agent may retry with sessions_send).
  for (const key of rules.DELIVERY_PARAM_KEYS)
    if (typeof raw === "object" && key in raw) return toolError(rules.deliveryParamError(key));
  const parsed = SessionsSpawnArgs.safeParse(raw);
  if (!parsed.success) return argsError(parsed.error);
  const args = parsed.data;
  const { config } = svc;
  const sa = config.agents.defaults.subagents;

  if (args.runtime === "acp") return toolError(rules.ACP_UNSUPPORTED_ERROR);
  // 1. agentId format, before anything is looked up.
  const requestedAgent = args.agentId?.trim().toLowerCase();
  if (args.agentId !== undefined && !rules.isValidAgentId(requestedAgent ?? ""))
    return toolError(rules.invalidAgentIdError(args.agentId));
  // 2. session mode needs a thread.
  if (args.mode === "session" && !args.thread) return toolError(rules.MODE_SESSION_ERROR);
  // 3. run timeout: param, else the configured default, else none.
  const runTimeoutSeconds = args.runTimeoutSeconds ?? args.timeoutSeconds ?? sa.runTimeoutSeconds;
  // 4. depth.
  const requester = await svc.sessions.get(caller.sessionKey);
  const callerDepth = requester?.spawnDepth ?? subagentDepthFromKey(caller.sessionKey);
  const maxDepth = rules.maxSpawnDepthFor(config, caller.agentId);
  if (callerDepth >= maxDepth) return forbidden(rules.depthError(callerDepth, maxDepth));
  // 5. the ids (src/tools/call-ids.ts), before the limit: a re-run of the turn that spawned
  //    finds its own child, which the limit counts, instead of being refused because of it.
  const targetAgent = requestedAgent ?? caller.agentId;
  const call = toolCallIds(caller, "sessions_spawn");
  const spawned = [targetAgent, args.task];
  const runId = call.id(...spawned);
  const childSessionKey = subagentSessionKey(targetAgent, call.id(...spawned, "child"));
  const registry = new SubagentRegistry(svc.redis, svc.keys, svc.runs.ttlSeconds);
  const spawnedBefore = call.derived && (await registry.get(runId)) !== null;
  // 6. active children. At the limit, slots held by runs whose spawn was cut off before their
  //    turn was queued are released first (src/subagents/unqueued.ts).
  let active = await registry.activeCount(caller.sessionKey);
  if (!spawnedBefore && active >= sa.maxChildrenPerAgent) {
    if ((await releaseUnqueued(svc, registry, await registry.activeRuns(caller.sessionKey))).size)
      active = await registry.activeCount(caller.sessionKey);
    if (active >= sa.maxChildrenPerAgent) return forbidden(rules.maxChildrenError(active, sa.maxChildrenPerAgent));
  }
  // 7. explicit agentId when required.
  if (!requestedAgent && rules.requireAgentIdFor(config, caller.agentId))
    return forbidden(rules.REQUIRE_AGENT_ID_ERROR);
  // 8. cross-agent allow list.
  const allowed = rules.checkTargetAgent(config, caller.agentId, targetAgent);
  if (!allowed.ok) return forbidden(allowed.error);

  // 9. sandbox.
  const childSandboxed = isAgentSandboxed(config, targetAgent);
  if (caller.sandboxed && !childSandboxed) return forbidden(rules.SANDBOX_INHERIT_ERROR);
  if (args.sandbox === "require" && !childSandboxed) return forbidden(rules.SANDBOX_REQUIRE_ERROR);
  // 10. model and thinking.
  const model = args.model ?? rules.subagentModelFor(config, targetAgent);
  const thinking = args.thinking ?? rules.subagentThinkingFor(config, targetAgent);
  if (thinking && !(rules.THINKING_LEVELS as readonly string[]).includes(thinking.toLowerCase()))
    return toolError(rules.invalidThinkingError(thinking), { childSessionKey });
  const badModel = model ? rules.invalidModelError(model) : undefined;
  if (badModel) return toolError(badModel, { childSessionKey });
  // 11. thread binding needs a channel plugin; Switchboard has none.
  if (args.thread) return toolError(rules.THREAD_UNAVAILABLE_ERROR, { childSessionKey });
  if (args.context === "fork" && targetAgent !== caller.agentId) {
    return toolError('context="fork" requires the same agent: a fork copies your own transcript.', { childSessionKey });
  }

  const depth = callerDepth + 1;
  const role = rules.roleAt(depth, maxDepth);
  const accepted = {
    status: "accepted",
    childSessionKey,
    runId,
    mode: "run",
    context: args.context ?? "isolated",
    note: rules.SPAWN_NOTE,
    ...(model ? { modelApplied: model } : {}),
  };
  // 12. the child session with its lineage (written once: the store refuses any later change).
  //     A re-run of the spawning turn never creates it again: if its first attempt's child is
  //     gone, it was removed after its run (cleanup "delete"), and the spawn is done.
  let child = await svc.sessions.get(childSessionKey);
  if (!child && spawnedBefore) return accepted;
  if (!child) {
    try {
      // Created with its stale instant: a model or thinking level set here is cleared by a rollover.
      child = await writeSessionSettings(
        svc,
        childSessionKey,
        {
          sessionId: call.id(...spawned, "session"),
          spawnedBy: caller.sessionKey,
          parentSessionKey: caller.sessionKey,
          spawnDepth: depth,
          subagentRole: role,
          sandboxed: childSandboxed,
          // No label: a session label is unique per agent, a spawn's is not (it names the run,
          // on its registry record: docs/concepts/subagents.md).
          ...(model ? { modelOverride: model } : {}),
          ...(thinking ? { thinkingLevel: thinking.toLowerCase() } : {}),
        },
        { before: null, mode: "create" },
      );
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === "session_exists") child = await svc.sessions.get(childSessionKey);
      else return toolError((err as Error).message, { childSessionKey });
    }
  }
  if (!child) return toolError("child session could not be created", { childSessionKey });

  if (args.context === "fork" && requester)
    await forkTranscript(
      svc,
      requester.agentId,
      requester.sessionId,
      child.agentId,
      child.sessionId,
      runId,
      transcriptTopicOf(requester.key),
    );

  // 13. the registry record, within the active-children limit (atomic with concurrent spawns).
  const record: SubagentRun = {
    runId,
    childSessionKey,
    requesterSessionKey: caller.sessionKey,
    task: args.task,
    ...(args.label ? { label: args.label } : {}),
    cleanup: args.cleanup ?? "keep",
    depth,
    ...(model ? { model } : {}),
    ...(runTimeoutSeconds > 0 ? { runTimeoutSeconds } : {}),
    createdAt: Date.now(),
    status: "running",
    announce: "pending",
    hop: caller.hop + 1,
  };
  const reg = await registry.register(record, sa.maxChildrenPerAgent, caller.runId);
  if (reg.result === "limit" || reg.result === "stopped") {
    await svc.sessions.delete(childSessionKey, child.agentId, child.kind).catch(() => null);
    if (reg.result === "stopped") return forbidden(SPAWN_BY_STOPPED_RUN_ERROR, { childSessionKey });
    return forbidden(rules.maxChildrenError(reg.active, sa.maxChildrenPerAgent));
  }

  // 14. the child's turn; its continuation is the announce. Refused, like any door's turn, when
  //     the child's inbox is full (gateway.limits.maxQueuedTurns): the run then ends unannounced.
  const queued = await enqueueTurn(
    svc,
    {
      runId,
      sessionKey: childSessionKey,
      agentId: child.agentId,
      sessionId: child.sessionId,
      text: rules.childTaskMessage(args.task, depth, maxDepth),
      step: "turn",
      provenance: "inter_session",
      source: { sessionKey: caller.sessionKey, tool: "sessions_spawn" },
      ...(runTimeoutSeconds > 0 ? { runTimeoutSeconds } : {}),
      ...(model ? { model } : {}),
      // A hop of the requester's chain: the child's sends, and the completion turn, count on.
      hop: caller.hop + 1,
      ...(caller.traceId ? { traceId: caller.traceId } : {}),
      continuation: announceContinuation(svc, childSessionKey, runId),
    },
    doorLimit(config),
  ).catch(async (err: unknown) => {
    if (err instanceof QueueFullError) return err;
    // Nothing queued: the registration is undone (refused in the same step if the push did queue
    // the turn and only its answer was lost). If Redis fails this too, the run is released once
    // it is older than the grace period (src/subagents/unqueued.ts).
    await dropUnqueued(svc, registry, record, Number.MAX_SAFE_INTEGER).catch(() => false);
    throw err;
  });
  if (queued instanceof QueueFullError) {
    const run = await registry.get(runId);
    if (run) {
      await registry.markEnded(run, "error", Date.now(), queued.message);
      await registry.update(runId, { announce: "skipped" });
    }
    return { ...queued.toolResult(childSessionKey), childSessionKey, runId };
  }
  // A kill of the caller that found this child registered but its turn not yet queued stopped
  // nothing in it: the kill suppressed it first, so seeing no suppression here means the kill's
  // stop comes after this push and finds the turn. A run released meanwhile (this spawn took
  // longer than the grace period between its registration and its push) is gone: its turn is
  // stopped too, and nothing was spawned.
  const current = await registry.get(runId);
  if (!current || current.suppressAnnounce === "killed") await stopRun(svc, childSessionKey, runId);
  if (!current) return toolError(SPAWN_RELEASED_ERROR, { childSessionKey });
  return accepted;
}

const SPAWN_BY_STOPPED_RUN_ERROR = "The calling run was stopped: nothing was spawned.";
const SPAWN_RELEASED_ERROR = "sessions_spawn took too long to queue the child's turn: nothing was spawned. Try again.";

/** Copy the requester's transcript into the child's, each line once (ids derived from the spawn). */
async function forkTranscript(
  svc: ToolDeps,
  fromAgent: string,
  fromSessionId: string,
  toAgent: string,
  toSessionId: string,
  runId: string,
  fromTopic?: string,
): Promise<void> {
  // A requester in a Telegram forum topic has its transcript in the topic file.
  const entries = await svc.transcripts.tail(
    fromAgent,
    fromSessionId,
    FORK_MAX_ENTRIES,
    fromTopic === undefined ? {} : { topicId: fromTopic },
  );
  const copies: TranscriptEntry[] = entries
    .filter((e) => e.type === "message")
    .map((e) => ({ ...e, id: `fork:${runId.slice(0, 8)}:${e.id}` }));
  await svc.transcripts.ensure(toAgent, toSessionId, {
    parentSession: svc.transcripts.path(fromAgent, fromSessionId, fromTopic),
  });
  if (copies.length) await svc.transcripts.append(toAgent, toSessionId, copies);
}
