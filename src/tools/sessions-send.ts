/**
 * sessions_send (docs/concepts/tools.md, "sessions_send"; without OpenClaw's lost-reply bug): resolve the target
 * (key or label),
 * check visibility, agent-to-agent policy, the target's sendPolicy and the hop bound, then
 * enqueue an inter-session turn whose result continues into the reply-back loop and announce.
 *  - timeoutSeconds 0: `accepted` at once.
 *  - > 0: wait through Redis: `ok` with this run's own reply (never a stale one: the reply comes
 *    from this run's record), `error`, or `timeout` — the run goes on and its reply still
 *    reaches the requester through the flow.
 *  - the caller's own session, from inside one of its turns: `accepted` at once whatever the
 *    timeout: the message is queued behind the very turn that would wait for it.
 * A cron requester gets no reply-back turns (maxPingPongTurns 0, as OpenClaw's fix for #92257).
 */
import { randomUUID } from "node:crypto";
import type { ToolDeps } from "./tool-deps.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RunWaiter } from "../runs/run-waiter.js";
import { doorLimit, enqueueTurn } from "../runs/enqueue.js";
import { QueueFullError } from "../errors/queue-full.js";
import { displaySessionKey } from "../session/key-canonical.js";
import { parseThreadSuffix } from "../session/key-parse.js";
import { sessionForTurn } from "../rotation/turn-session.js";
import { ensureSession } from "../storage/ensure-session.js";
import type { SessionEntry } from "../session/session-entry.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { toolCallIds } from "./call-ids.js";
import { sanitizeForHandoff } from "../history/handoff.js";
import { guard, mayFind } from "./access.js";
import { messageContext } from "./a2a-prompts.js";
import { isCronSessionKey, primaryContinuation } from "./a2a-flow.js";
import { resolveSessionRef } from "./resolve-ref.js";
import { SessionsSendArgs } from "./schemas.js";
import { forbidden, toolError, type ToolCaller, type ToolResult, argsError } from "./tool-context.js";
import { agentToAgentAllowed } from "./visibility.js";

const LUA_DIR = new URL("./lua/", import.meta.url);
export const DEFAULT_SEND_TIMEOUT_SECONDS = 30;
export const THREAD_TARGET_ERROR =
  "sessions_send cannot target a thread session for inter-agent coordination. " +
  "Use the parent channel session key instead.";

export async function sessionsSend(
  svc: ToolDeps,
  waiter: RunWaiter,
  caller: ToolCaller,
  rawArgs: unknown,
  /** The caller stopped waiting (an MCP client's cancel): the wait ends as a timeout, the run goes on. */
  signal?: AbortSignal,
): Promise<ToolResult> {
  // Called from a turn, the send's id follows from the call and what it sends where
  // (src/tools/call-ids.ts); answers given before the target is known carry the call's own id.
  const call = toolCallIds(caller, "sessions_send");
  let runId = call.id();
  const parsed = SessionsSendArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error, { runId });
  const args = parsed.data;
  if (args.sessionKey && args.label) return toolError("Provide either sessionKey or label (not both).", { runId });
  if (!args.sessionKey && !args.label) return toolError("Either sessionKey or label is required", { runId });

  let targetKey: string;
  let resolved: SessionEntry | undefined;
  if (args.label) {
    const agentId = args.agentId ?? caller.agentId;
    if (agentId !== caller.agentId) {
      if (caller.sandboxed)
        return forbidden("Sandboxed sessions_send label lookup is limited to this agent", { runId });
      const a2a = agentToAgentAllowed(svc.config, caller.agentId, agentId);
      if (a2a === "disabled")
        return forbidden(
          "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
          { runId },
        );
      if (a2a === "denied") return forbidden("Agent-to-agent messaging denied by tools.agentToAgent.allow.", { runId });
    }
    const key = await svc.sessions.keyForLabel(agentId, args.label);
    // A label of a session the sandboxed caller may not see answers as a label nobody has.
    if (!key || !(await mayFind(svc, caller, key)))
      return caller.sandboxed
        ? forbidden("Session not visible from this sandboxed agent session.", { runId })
        : toolError(`No session found with label: ${args.label}`, { runId });
    targetKey = key;
  } else {
    const ref = await resolveSessionRef(svc, caller, args.sessionKey!);
    if (!ref.ok) return { status: ref.status, error: ref.error, runId };
    targetKey = ref.key;
    resolved = ref.entry;
  }
  // A refused target is not named back: it may have been found by a label or sessionId, and the
  // caller is not to learn the key of a session it cannot see. Hence the guard comes first.
  const g = await guard(svc, caller, "send", targetKey);
  if (!g.allowed) return forbidden(g.error, { runId });
  const displayKey = displaySessionKey(svc.config, targetKey, caller.agentId);
  // Tool-routed messages must never show up inside a human-facing thread.
  if (parseThreadSuffix(targetKey).threadId !== undefined)
    return toolError(THREAD_TARGET_ERROR, { runId, sessionKey: displayKey });
  const maxHops = svc.config.session.agentToAgent.maxHops;
  if (caller.hop + 1 > maxHops) {
    return forbidden(
      `Agent-to-agent hop limit reached (${maxHops}): this message chain has gone through too many sessions.`,
      { runId, sessionKey: displayKey },
    );
  }
  // The entry resolving the key read a moment ago, else read now. A denied target is an error,
  // not a visibility matter: OpenClaw answers it as its agent RPC fails. Checked before a
  // missing session is created (on null, as an inbound message is), so a refused send leaves
  // no entry behind; and again on the entry created, which a concurrent caller may have written.
  const existing = resolved ?? (await svc.sessions.get(targetKey));
  const blocked = (entry: SessionEntry | null) => sessionSendPolicy(svc.config, targetKey, entry) === "deny";
  if (blocked(existing)) return toolError("send blocked by session policy", { runId, sessionKey: displayKey });
  const stored = existing ?? (await ensureSession(svc, targetKey));
  if (!existing && blocked(stored))
    return toolError("send blocked by session policy", { runId, sessionKey: displayKey });
  // Rolled over if stale, and the message counts as its activity, as an agent run does in OpenClaw.
  const target = await sessionForTurn(svc, stored);

  const requester = await svc.sessions.get(caller.sessionKey);
  const parties = {
    requesterKey: caller.sessionKey,
    ...(requester?.lastChannel ? { requesterChannel: requester.lastChannel } : {}),
    targetKey,
    ...(target.lastChannel ? { targetChannel: target.lastChannel } : {}),
  };
  runId = call.id(targetKey, args.message);
  const traceId = caller.traceId ?? randomUUID();
  const hop = caller.hop + 1;
  // A new turn from a door: refused when the target's inbox is full (gateway.limits.maxQueuedTurns).
  // A re-run of the calling turn finds its send queued already (same runId): never refused.
  const queued = await enqueueTurn(
    svc,
    {
      runId,
      sessionKey: targetKey,
      agentId: target.agentId,
      sessionId: target.sessionId,
      text: args.message,
      step: "turn",
      provenance: "inter_session",
      source: {
        sessionKey: caller.sessionKey,
        tool: "sessions_send",
        ...(requester?.lastChannel ? { channel: requester.lastChannel } : {}),
        ...(caller.runId ? { runId: caller.runId } : {}),
      },
      extraSystemPrompt: messageContext(parties),
      hop,
      traceId,
      continuation: primaryContinuation(svc, runId, {
        ...parties,
        requesterAgent: caller.agentId,
        targetAgent: target.agentId,
        original: args.message,
        // A cron run is not a conversation: the target's reply is not fed back into it (#92257).
        maxTurns: isCronSessionKey(caller.sessionKey) ? 0 : svc.config.session.agentToAgent.maxPingPongTurns,
        hop,
        traceId,
        primaryRunId: runId,
      }),
    },
    doorLimit(svc.config),
  ).catch((err: unknown) => {
    if (err instanceof QueueFullError) return err;
    throw err;
  });
  if (queued instanceof QueueFullError) return { ...queued.toolResult(displayKey), runId };
  // A session writing to itself gets no announce step (nor reply-back): nothing is pending.
  const self = targetKey === caller.sessionKey;
  const delivery = self ? undefined : { status: "pending", mode: "announce" };
  const timeoutSeconds = args.timeoutSeconds ?? DEFAULT_SEND_TIMEOUT_SECONDS;
  if (timeoutSeconds === 0)
    return { runId, status: "accepted", sessionKey: displayKey, ...(delivery ? { delivery } : {}) };
  // A turn of this very session is running (the caller's): the message is queued behind it, so
  // waiting could only end in a timeout. It runs once this turn is over.
  if (self && caller.runId) {
    return {
      runId,
      status: "accepted",
      sessionKey: displayKey,
      note: "The target is this session: the message runs after the current turn ends; no reply is awaited.",
    };
  }

  // A turn's own wait (caller.runId) is not a gateway request's: a gateway closing in the same
  // process (`switchboard start`) leaves it to the turn's worker and its grace.
  const { record, timedOut, handedOver } = await waiter.wait(runId, timeoutSeconds * 1000, {
    ...(signal ? { signal } : {}),
    handOver: !caller.runId,
  });
  if (timedOut || !record) {
    const markLate = luaCommand(svc.redis, LUA_DIR, "a2a-mark-late");
    // The flag lives as long as the run's record: the run may finish (and read it) until then.
    const flagTtl = svc.runs.ttlSeconds;
    const status = (await markLate([svc.keys.run(runId), svc.keys.a2aLate(runId)], [flagTtl])) as string;
    if (status === "late") {
      const why = record?.stalledReason ? ` (${record.stalledReason})` : "";
      // Handed over early by a closing gateway: "no reply within <timeout>" would be false.
      const waited =
        handedOver !== undefined
          ? `No reply yet: ${handedOver} and stopped waiting${why} (agent.wait with the runId on another gateway ` +
            "waits again)"
          : `No reply within ${timeoutSeconds}s${why}`;
      return {
        runId,
        status: "timeout",
        error:
          `${waited}; the run continues` +
          // A cron run (or the session itself) is not handed the reply later (see a2a-flow.ts).
          (self || isCronSessionKey(caller.sessionKey) ? "." : " and its reply will reach this session."),
        sessionKey: displayKey,
        ...(delivery ? { delivery } : {}),
      };
    }
    const finished = await svc.runs.get(runId);
    return finishedResult(runId, displayKey, finished?.status ?? status, finished?.reply, finished?.error, delivery);
  }
  return finishedResult(runId, displayKey, record.status, record.reply, record.error, delivery);
}

function finishedResult(
  runId: string,
  sessionKey: string,
  status: string,
  reply: string | undefined,
  error: string | undefined,
  delivery: object | undefined,
): ToolResult {
  // The run record keeps the raw answer; what goes back to the calling agent is cleaned.
  if (status === "ok")
    return { runId, status: "ok", reply: sanitizeForHandoff(reply), sessionKey, ...(delivery ? { delivery } : {}) };
  return {
    runId,
    status: "error",
    error: error ?? (status === "killed" ? "run was stopped" : status === "timeout" ? "run timed out" : "agent error"),
    sessionKey,
  };
}
