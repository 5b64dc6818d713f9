/**
 * Runs one turn for the lease holder. Every step is idempotent on the turn's runId, so a turn
 * re-run after a crash (or a stalled job retried on another host) finishes the same run and
 * leaves each transcript line exactly once:
 *
 *   user line `<runId>:u`  →  record running  →  runtime  →  assistant/tool lines `<runId>:a…`
 *   →  result saved on the record  →  follow-ups enqueued with deterministic job ids
 *   →  finish (terminal record + in-flight freed + waiters notified, one script)
 *
 * A re-run that finds the result already saved skips the runtime and reuses it. Every write is
 * fenced by the session lease token.
 */
import type { Services } from "../app/services.js";
import { agentRuntime, isAgentSandboxed } from "../config/agents.js";
import { StaleFenceError } from "../errors/index.js";
import { createRuntime } from "../runtimes/registry.js";
import { RunAbortedError, type RunOutput, type ToolInvoker } from "../runtimes/types.js";
import type { LeaseHandle } from "../runs/session-lease.js";
import { isTerminal, type TerminalStatus, type Turn } from "../runs/turn.js";
import type { TranscriptEntry, TranscriptMessage } from "../transcript/types.js";
import { isSilentReply } from "./silent-reply.js";
import { enqueueDelivery } from "./deliver.js";
import { enqueueContinuation } from "../runs/continuation.js";
import { sanitizeForHandoff } from "../history/handoff.js";
import { interSessionProvenance } from "../runtimes/inter-session.js";
import { redactTranscriptEntries } from "../history/redact-transcript.js";
import { topicOpt } from "../lifecycle/transcript-topic.js";
import { luaSafeJson, wellFormed } from "../text/well-formed.js";

/** How many recent transcript messages a runtime sees as history. */
const HISTORY_LIMIT = 50;

export type ToolInvokerFactory = (ctx: {
  sessionKey: string;
  agentId: string;
  runId: string;
  sandboxed: boolean;
  hop?: number;
  traceId?: string;
  /** Stored lineage: decides the session's tool list (docs/concepts/subagents.md). */
  spawnDepth?: number;
  subagentRole?: "orchestrator" | "leaf";
}) => ToolInvoker;

export interface TurnOutcome {
  status: TerminalStatus;
  reply?: string;
  error?: string;
}

/** Local registry of running turns, so a cancel broadcast can abort them. */
export class RunningTurns {
  private readonly bySession = new Map<string, { runId: string; controller: AbortController }>();

  start(sessionKey: string, runId: string): AbortController {
    const controller = new AbortController();
    this.bySession.set(sessionKey, { runId, controller });
    return controller;
  }
  end(sessionKey: string, runId: string): void {
    if (this.bySession.get(sessionKey)?.runId === runId) this.bySession.delete(sessionKey);
  }
  /** Abort the session's running turn (optionally only if it is `runId`). Returns true if one was aborted. */
  abort(sessionKey: string, reason: string, runId?: string): boolean {
    const cur = this.bySession.get(sessionKey);
    if (!cur || (runId && cur.runId !== runId)) return false;
    cur.controller.abort(new Error(reason));
    return true;
  }
  get size(): number {
    return this.bySession.size;
  }
}

function entry(id: string, runId: string, message: TranscriptMessage, ts: number): TranscriptEntry {
  return { type: "message", id, runId, timestamp: new Date(ts).toISOString(), message };
}

/** The transcript lines of a turn's result (tool calls, then the reply or the error), ids fixed by runId. */
function resultEntries(turn: Turn, outcome: TurnOutcome, output: RunOutput | undefined, now: number): TranscriptEntry[] {
  const lines: TranscriptEntry[] = [];
  (output?.toolCalls ?? []).forEach((call, i) => {
    const callId = `call_${turn.runId.slice(0, 8)}_${i}`;
    lines.push(
      entry(`${turn.runId}:t${i}`, turn.runId, { role: "assistant", content: [{ type: "toolCall", id: callId, name: call.name, arguments: call.args }], timestamp: now }, now),
      entry(`${turn.runId}:r${i}`, turn.runId, { role: "toolResult", toolCallId: callId, toolName: call.name, content: [{ type: "text", text: JSON.stringify(call.result) }], isError: false, timestamp: now }, now),
    );
  });
  if (outcome.status === "ok") {
    lines.push(
      entry(`${turn.runId}:a`, turn.runId, {
        role: "assistant",
        content: [{ type: "text", text: outcome.reply ?? "" }],
        timestamp: now,
        stopReason: "stop",
        ...(output?.model ? { model: output.model } : {}),
        ...(output?.usage ? { usage: { input: output.usage.input, output: output.usage.output, totalTokens: output.usage.input + output.usage.output } } : {}),
      }, now),
    );
  } else {
    lines.push(
      entry(`${turn.runId}:a`, turn.runId, { role: "assistant", content: [], timestamp: now, stopReason: outcome.status === "error" ? "error" : "aborted", errorMessage: outcome.error }, now),
    );
  }
  return lines;
}

/** The runtime output saved with a result (tool calls, model, usage), for a re-run's lines. */
function savedOutput(raw: string | undefined, reply: string | undefined): RunOutput | undefined {
  if (!raw) return undefined;
  try {
    return { reply: reply ?? "", ...(JSON.parse(raw) as Omit<RunOutput, "reply">) };
  } catch {
    return undefined;
  }
}

export class TurnExecutor {
  constructor(
    private readonly svc: Services,
    private readonly running: RunningTurns,
    private readonly tools: ToolInvokerFactory,
  ) {}

  async execute(turn: Turn, lease: LeaseHandle): Promise<TurnOutcome> {
    // Registered before the record is read: a /stop either finds this turn registered (its
    // broadcast aborts it) or flagged the record before this read (seen below). None is lost.
    const controller = this.running.start(turn.sessionKey, turn.runId);
    try {
      return await this.executeRegistered(turn, lease, controller);
    } finally {
      this.running.end(turn.sessionKey, turn.runId);
    }
  }

  private async executeRegistered(turn: Turn, lease: LeaseHandle, controller: AbortController): Promise<TurnOutcome> {
    const { svc } = this;
    const fence = { key: lease.fenceKey, token: lease.token };
    const record = await svc.runs.get(turn.runId);
    if (record?.cancelRequested) controller.abort(new Error(`run ${record.cancelRequested}`));
    if (record && isTerminal(record.status)) {
      // Finished before a crash freed the slot (or killed while queued): just free it now.
      await svc.runs.finish(lease, turn.runId, record.status);
      return { status: record.status, ...(record.reply !== undefined ? { reply: record.reply } : {}) };
    }

    const topic = topicOpt(turn.sessionKey); // Telegram forum topics: `<sessionId>-topic-<n>.jsonl`
    if (turn.archive) await svc.transcripts.archive(turn.agentId, turn.archive.sessionId, turn.archive.kind, new Date(), topic);
    await svc.transcripts.ensure(turn.agentId, turn.sessionId, topic);
    const userMessage: TranscriptMessage = {
      role: "user",
      content: turn.text,
      timestamp: turn.messageTs,
      ...(turn.source ? { provenance: interSessionProvenance(turn.source) } : {}),
    };
    // Stored with credentials masked; the runtime below still gets turn.text as sent.
    const userLine = redactTranscriptEntries([entry(`${turn.runId}:u`, turn.runId, userMessage, turn.messageTs)], svc.config.transcripts.redactSecrets);
    await svc.transcripts.append(turn.agentId, turn.sessionId, userLine, { fence, ...topic });

    let output: RunOutput | undefined;
    let outcome: TurnOutcome;
    let resultAt: number;
    if (record?.resultSaved) {
      // Re-run after a crash or a storage fault: the outcome was saved before its transcript
      // lines, so the runtime does not run again and the lines are (re)written from the record.
      const status = record.resultStatus ?? "ok";
      outcome = status === "ok" ? { status, reply: record.reply ?? "" } : { status, ...(record.resultError ? { error: record.resultError } : {}) };
      output = savedOutput(record.resultOutput, outcome.reply);
      resultAt = record.resultAt ?? Date.now();
    } else {
      await svc.runs.update(lease, turn.runId, {
        status: "running",
        startedAt: record?.startedAt ?? Date.now(),
        attempts: (record?.attempts ?? 0) + 1,
      });
      const result = await this.runRuntime(turn, lease, controller);
      output = result.output;
      outcome = result.outcome;
      resultAt = Date.now();
      await this.saveResult(turn, lease, outcome, output, resultAt);
    }
    const resultLines = redactTranscriptEntries(resultEntries(turn, outcome, output, resultAt), svc.config.transcripts.redactSecrets);
    await svc.transcripts.append(turn.agentId, turn.sessionId, resultLines, { fence, ...topic });

    await this.enqueueFollowUps(turn, outcome);
    const finishedNow = await svc.runs.finish(lease, turn.runId, outcome.status, {
      ...(outcome.error ? { error: outcome.error } : {}),
    });
    if (finishedNow) await this.updateSessionAfterRun(turn, outcome, output);
    return outcome;
  }

  private async runRuntime(turn: Turn, lease: LeaseHandle, controller: AbortController): Promise<{ outcome: TurnOutcome; output?: RunOutput }> {
    const { svc } = this;
    const signals = [controller.signal, lease.lost];
    if (turn.runTimeoutSeconds && turn.runTimeoutSeconds > 0) signals.push(AbortSignal.timeout(turn.runTimeoutSeconds * 1000));
    const signal = AbortSignal.any(signals);
    try {
      const entryNow = await svc.sessions.get(turn.sessionKey);
      const runtime = createRuntime(agentRuntime(svc.config, turn.agentId));
      const output = await runtime.run({
        runId: turn.runId,
        agentId: turn.agentId,
        sessionKey: turn.sessionKey,
        sessionId: turn.sessionId,
        text: turn.text,
        step: turn.step,
        provenance: turn.provenance,
        ...(turn.source ? { interSession: interSessionProvenance(turn.source) } : {}),
        // The transcript's tail minus this turn's own user line (already written).
        loadHistory: async () => (await svc.transcripts.messages(turn.agentId, turn.sessionId, HISTORY_LIMIT + 1, topicOpt(turn.sessionKey))).slice(0, -1),
        signal,
        tools: this.tools({
          sessionKey: turn.sessionKey,
          agentId: turn.agentId,
          runId: turn.runId,
          sandboxed: entryNow?.sandboxed ?? isAgentSandboxed(svc.config, turn.agentId),
          hop: turn.hop ?? 0,
          ...(turn.traceId ? { traceId: turn.traceId } : {}),
          ...(entryNow?.spawnDepth ? { spawnDepth: entryNow.spawnDepth, ...(entryNow.subagentRole ? { subagentRole: entryNow.subagentRole } : {}) } : {}),
        }),
        ...(turn.extraSystemPrompt ? { extraSystemPrompt: turn.extraSystemPrompt } : {}),
        ...((turn.model ?? entryNow?.modelOverride) ? { model: turn.model ?? entryNow?.modelOverride } : {}),
      });
      if (signal.aborted) throw new RunAbortedError(signal.reason);
      const reply = wellFormed(output.reply);
      return { outcome: { status: "ok", reply }, output: { ...output, reply } };
    } catch (err) {
      if (lease.lost.aborted) throw new StaleFenceError(turn.sessionKey, lease.token, null);
      if (err instanceof RunAbortedError || signal.aborted) {
        const reason = signal.reason as Error | undefined;
        const timedOut = reason?.name === "TimeoutError";
        return { outcome: { status: timedOut ? "timeout" : "killed", error: timedOut ? "run timed out" : (reason?.message ?? "killed") } };
      }
      if (err instanceof StaleFenceError) throw err;
      return { outcome: { status: "error", error: wellFormed((err as Error)?.message ?? String(err)) } };
    }
  }

  /**
   * Save the outcome on the run record before any transcript line is written: from here on a
   * re-run reuses it instead of running the runtime again (its tools, its cost).
   */
  private async saveResult(turn: Turn, lease: LeaseHandle, outcome: TurnOutcome, output: RunOutput | undefined, at: number): Promise<void> {
    const extra = { ...(output?.toolCalls?.length ? { toolCalls: output.toolCalls } : {}), ...(output?.model ? { model: output.model } : {}), ...(output?.usage ? { usage: output.usage } : {}) };
    await this.svc.runs.update(lease, turn.runId, {
      resultSaved: 1,
      resultStatus: outcome.status,
      resultAt: at,
      ...(Object.keys(extra).length ? { resultOutput: luaSafeJson(extra) } : {}),
      ...(outcome.error ? { resultError: outcome.error } : {}),
      // Only a successful run has a reply; a killed/failed/timed-out one must not report `reply: ""`.
      ...(outcome.status === "ok" ? { reply: outcome.reply ?? "" } : {}),
      ...(output?.usage ? { usageInput: output.usage.input, usageOutput: output.usage.output } : {}),
    });
  }

  /**
   * Reply delivery (successful runs) and continuations (every outcome: a flow must learn that
   * its step failed), with job ids derived from the runId so re-runs add nothing new.
   */
  private async enqueueFollowUps(turn: Turn, outcome: TurnOutcome): Promise<void> {
    const { svc } = this;
    const reply = sanitizeForHandoff(outcome.reply);
    if (outcome.status === "ok" && turn.deliver && !isSilentReply(reply)) {
      await enqueueDelivery(svc, { id: `reply-${turn.runId}`, sessionKey: turn.sessionKey, route: turn.deliver, message: reply.trim(), kind: "reply" });
    }
    await enqueueContinuation(svc, turn, outcome);
  }

  private async updateSessionAfterRun(turn: Turn, outcome: TurnOutcome, output: RunOutput | undefined): Promise<void> {
    const { svc } = this;
    const entryNow = await svc.sessions.get(turn.sessionKey);
    if (!entryNow || entryNow.sessionId !== turn.sessionId) return; // rotated meanwhile: stats belong to the old one
    await svc.sessions.upsert(
      turn.sessionKey,
      { agentId: entryNow.agentId, kind: entryNow.kind },
      {
        abortedLastRun: outcome.status === "killed" || outcome.status === "timeout",
        systemSent: true,
        ...(output?.model ? { model: output.model } : {}),
      },
      {
        // Run bookkeeping is not user activity: freshness stays driven by message times.
        activity: "preserve",
        ...(output?.usage
          ? { increment: { inputTokens: output.usage.input, outputTokens: output.usage.output, totalTokens: output.usage.input + output.usage.output } }
          : {}),
      },
    );
  }
}

