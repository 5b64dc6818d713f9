/**
 * Runs one turn for the lease holder (docs/design/runs.md, "One turn"):
 *
 *   turn-begin (taken, marked running, with its record and session entry: one round trip)
 *   →  runtime  →  one transcript write (user line + tool and result lines)
 *   →  follow-ups with deterministic job ids  →  turn finish (terminal record with the reply,
 *   in-flight freed, the record published to waiters: one script)
 *
 * Every step is idempotent on the runId, so a turn re-run after a crash (or a stalled job
 * retried on another host, or a storage fault) finishes the same run and leaves each transcript
 * line exactly once: a re-run first reads the lines its run already has at the end of the
 * transcript and recovers the outcome from them, so the runtime does not run twice. When the
 * transcript write itself fails, the outcome is saved on the record before the turn is parked.
 */
import type { WorkerDeps } from "./worker-deps.js";
import { agentRuntime, isAgentSandboxed } from "../config/agents.js";
import { SessionConflictError, SessionNotFoundError, StaleFenceError, TurnHandedBackError } from "../errors/index.js";
import { createRuntime } from "../runtimes/registry.js";
import { RunAbortedError, type RunOutput, type ToolInvokerFactory } from "../runtimes/types.js";
import { surelyHeld, type LeaseHandle } from "../runs/session-lease.js";
import { isTerminal, type SavedOutcome, type TerminalStatus, type Turn } from "../runs/turn.js";
import type { TranscriptEntry, TranscriptMessage } from "../history/transcript-types.js";
import { enqueueDelivery, enqueueOrSettleDelivery } from "../delivery/deliver.js";
import { enqueueContinuation } from "../runs/continuation.js";
import { chatReply } from "../history/handoff.js";
import { interSessionProvenance } from "../runtimes/inter-session.js";
import { redactTranscriptEntries, redactValue } from "../history/redact-transcript.js";
import { topicOpt, transcriptTopicOf } from "../session/transcript-topic.js";
import { luaSafeJson, wellFormed } from "../text/well-formed.js";
import { linkSignals } from "../runtimes/combined-signal.js";
import type { BegunTurn } from "../runs/inbox.js";
import type { FinishPush, RawBegun, RunRecord } from "../runs/run-records.js";
import type { DeadLetter } from "../runs/dead-letters.js";
import { enqueueArchiveOf } from "../rotation/rotate.js";
import { archiveDone } from "../rotation/pending-archives.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { activityEveryMs, cachedStaleAt } from "../rotation/turn-session.js";
import { lastActivityOf } from "../session/entry-freshness.js";
import { entryCache, knownEntry } from "../runs/entry-cache.js";
import { readyWake, requestDrain } from "../runs/enqueue.js";
import { A2A_STEP, a2aStepOf, planA2AStep } from "../tools/a2a-flow.js";
import type { SessionEntry } from "../session/session-entry.js";
import type { HolderWriter } from "../transcript/holder-writer.js";

/** How many recent transcript messages a runtime sees as history. */
const HISTORY_LIMIT = 50;
/** Times an agent-to-agent step is decided again because a session entry changed under it. */
const MAX_FLOW_DECISIONS = 5;

/** The turn the finish began after this one (see RunRecords.finishStep): undefined when not asked. */
export type NextTurn = BegunTurn | { corrupt: string } | null | undefined;

export interface TurnOutcome {
  status: TerminalStatus;
  reply?: string;
  error?: string;
}

/** Local registry of running turns, so a cancel broadcast can abort them. */
export class RunningTurns {
  private readonly bySession = new Map<string, { runId: string; controller: AbortController }>();
  /**
   * Cancels for runs not (yet) registered here, kept briefly: a turn begun by a script reads its
   * record's cancel flag before it registers, so a /stop landing in between is caught here.
   */
  private readonly early = new Map<string, { reason: string; at: number }>();

  start(sessionKey: string, runId: string): AbortController {
    const controller = new AbortController();
    this.bySession.set(sessionKey, { runId, controller });
    const early = this.early.get(runId);
    if (early) {
      this.early.delete(runId);
      controller.abort(new Error(early.reason));
    }
    return controller;
  }
  end(sessionKey: string, runId: string): void {
    if (this.bySession.get(sessionKey)?.runId === runId) this.bySession.delete(sessionKey);
  }
  /** Abort the session's running turn (optionally only if it is `runId`). Returns true if one was aborted. */
  abort(sessionKey: string, reason: string, runId?: string): boolean {
    const cur = this.bySession.get(sessionKey);
    if (!cur || (runId && cur.runId !== runId)) {
      if (runId) this.remember(runId, reason);
      return false;
    }
    cur.controller.abort(new Error(reason));
    return true;
  }
  /**
   * Interrupt every running turn to hand it back (a worker shutting down past its grace): the
   * executor ends it with TurnHandedBackError instead of an outcome. Returns how many.
   */
  handBackAll(): number {
    for (const [sessionKey, cur] of this.bySession)
      cur.controller.abort(new TurnHandedBackError(sessionKey, cur.runId));
    return this.bySession.size;
  }
  get size(): number {
    return this.bySession.size;
  }
  /** The runs held here now. */
  held(): { sessionKey: string; runId: string }[] {
    return [...this.bySession].map(([sessionKey, cur]) => ({ sessionKey, runId: cur.runId }));
  }

  private remember(runId: string, reason: string): void {
    const now = Date.now();
    for (const [id, e] of this.early) if (now - e.at > EARLY_CANCEL_MS) this.early.delete(id);
    this.early.set(runId, { reason, at: now });
  }
}

/** How long a cancel for a run not registered here is kept (a begun turn registers within ms). */
const EARLY_CANCEL_MS = 60_000;

function entry(id: string, runId: string, message: TranscriptMessage, ts: number): TranscriptEntry {
  return { type: "message", id, runId, timestamp: new Date(ts).toISOString(), message };
}

/** The transcript lines of a turn's result (tool calls, then the reply or the error), ids fixed by runId. */
function resultEntries(
  turn: Turn,
  outcome: TurnOutcome,
  output: RunOutput | undefined,
  now: number,
  redact: boolean,
): TranscriptEntry[] {
  const lines: TranscriptEntry[] = [];
  (output?.toolCalls ?? []).forEach((call, i) => {
    const callId = `call_${turn.runId.slice(0, 8)}_${i}`;
    lines.push(
      entry(
        `${turn.runId}:t${i}`,
        turn.runId,
        {
          role: "assistant",
          content: [{ type: "toolCall", id: callId, name: call.name, arguments: call.args }],
          timestamp: now,
        },
        now,
      ),
      entry(
        `${turn.runId}:r${i}`,
        turn.runId,
        {
          role: "toolResult",
          toolCallId: callId,
          toolName: call.name,
          // Redacted before it becomes JSON text: inside that text every quote of a string value
          // is escaped, which no credential pattern sees through (`{\"apiKey\": \"…\"}`).
          content: [{ type: "text", text: JSON.stringify(redact ? redactValue(call.result) : call.result) }],
          isError: false,
          timestamp: now,
        },
        now,
      ),
    );
  });
  if (outcome.status === "ok" && output?.yielded) {
    lines.push(...yieldedEntries(turn.runId, output, now));
  } else if (outcome.status === "ok") {
    lines.push(
      entry(
        `${turn.runId}:a`,
        turn.runId,
        {
          role: "assistant",
          content: [{ type: "text", text: outcome.reply ?? "" }],
          timestamp: now,
          stopReason: "stop",
          ...modelAndUsage(output),
        },
        now,
      ),
    );
  } else {
    lines.push(
      entry(
        `${turn.runId}:a`,
        turn.runId,
        {
          role: "assistant",
          content: [],
          timestamp: now,
          stopReason: outcome.status === "error" ? "error" : "aborted",
          errorMessage: outcome.error,
        },
        now,
      ),
    );
  }
  return lines;
}

/** The model and token usage an assistant line records, when the runtime reported them. */
function modelAndUsage(output: RunOutput | undefined): Pick<TranscriptMessage, "model" | "usage"> {
  return {
    ...(output?.model ? { model: output.model } : {}),
    ...(output?.usage
      ? {
          usage: {
            input: output.usage.input,
            output: output.usage.output,
            totalTokens: output.usage.input + output.usage.output,
          },
        }
      : {}),
  };
}

/**
 * A turn ended by sessions_yield, written as OpenClaw writes it: an empty assistant message
 * stopped as `aborted`, then a hidden `openclaw.sessions_yield` note (a `custom` line, not
 * replayed to models). See docs/concepts/subagents.md, sessions_yield.
 */
function yieldedEntries(runId: string, output: RunOutput, now: number): TranscriptEntry[] {
  const message = output.yielded?.message ?? "";
  const ts = new Date(now).toISOString();
  return [
    entry(
      `${runId}:a`,
      runId,
      {
        role: "assistant",
        content: [{ type: "text", text: "" }],
        timestamp: now,
        stopReason: "aborted",
        ...modelAndUsage(output),
      },
      now,
    ),
    {
      type: "custom",
      id: `${runId}:y`,
      runId,
      timestamp: ts,
      customType: "openclaw.sessions_yield",
      data: {
        message,
        note:
          `${message}\n\n[Context: The previous turn ended intentionally via sessions_yield while waiting for ` +
          `a follow-up event.]`,
      },
    },
  ];
}

/** The turn's user line. */
function userEntry(turn: Turn): TranscriptEntry {
  const userMessage: TranscriptMessage = {
    role: "user",
    content: turn.text,
    timestamp: turn.messageTs,
    ...(turn.source ? { provenance: interSessionProvenance(turn.source) } : {}),
  };
  return entry(`${turn.runId}:u`, turn.runId, userMessage, turn.messageTs);
}

interface Recovered {
  outcome: TurnOutcome;
  output?: RunOutput;
  at: number;
}

/** The outcome an earlier attempt saved on the record (a parked turn). */
function savedResult(record: RunRecord): Recovered {
  const status = record.resultStatus ?? "ok";
  const outcome: TurnOutcome =
    status === "ok"
      ? { status, reply: record.reply ?? "" }
      : { status, ...(record.resultError ? { error: record.resultError } : {}) };
  const output = savedOutput(record.resultOutput, outcome.reply);
  return { outcome, ...(output ? { output } : {}), at: record.resultAt ?? Date.now() };
}

/** The outcome a replayed dead letter carries (saved by the run that was given up). */
function replayedResult(saved: SavedOutcome): Recovered {
  const outcome: TurnOutcome =
    saved.status === "ok"
      ? { status: "ok", reply: saved.reply ?? "" }
      : { status: saved.status, ...(saved.error ? { error: saved.error } : {}) };
  const output = savedOutput(saved.output, outcome.reply);
  return { outcome, ...(output ? { output } : {}), at: saved.at };
}

/**
 * The outcome an earlier attempt wrote to the transcript before it died: its `<runId>:a` line
 * (and the tool lines before it). Null when that attempt did not get that far.
 */
export function outcomeFromLines(runId: string, lines: TranscriptEntry[]): Recovered | null {
  const final = lines.find((l) => l.id === `${runId}:a`);
  const msg = final?.message as
    | (TranscriptMessage & { errorMessage?: string; usage?: { input: number; output: number } })
    | undefined;
  if (!final || !msg) return null;
  const at = Date.parse(final.timestamp ?? "") || Date.now();
  const toolCalls = lines
    .filter((l) => /:t\d+$/.test(l.id))
    .map((l) => {
      const call = (l.message?.content as { name: string; arguments: Record<string, unknown> }[] | undefined)?.[0];
      const res = lines.find((r) => r.id === l.id.replace(/:t(\d+)$/, ":r$1"));
      const text = (res?.message?.content as { text?: string }[] | undefined)?.[0]?.text;
      return {
        name: call?.name ?? "",
        args: call?.arguments ?? {},
        result: text === undefined ? null : safeParse(text),
      };
    });
  const extra = {
    ...(toolCalls.length ? { toolCalls } : {}),
    ...(msg.model ? { model: msg.model } : {}),
    ...(msg.usage ? { usage: { input: msg.usage.input, output: msg.usage.output } } : {}),
  };
  // A yielded turn (its `:y` note is written with its `:a` line): ok, no reply.
  const yieldNote = lines.find((l) => l.id === `${runId}:y`);
  if (yieldNote) {
    const yielded = { message: String((yieldNote.data as { message?: unknown } | undefined)?.message ?? "") };
    return { outcome: { status: "ok", reply: "" }, output: { reply: "", ...extra, yielded }, at };
  }
  if (msg.stopReason === "stop") {
    const reply = (msg.content as { type: string; text?: string }[])
      .filter((b) => b.type === "text")
      .map((b) => b.text ?? "")
      .join("");
    return { outcome: { status: "ok", reply }, output: { reply, ...extra }, at };
  }
  const error = msg.errorMessage;
  const status: TerminalStatus =
    msg.stopReason === "error" ? "error" : error === "run timed out" ? "timeout" : "killed";
  return {
    outcome: { status, ...(error ? { error } : {}) },
    ...(Object.keys(extra).length ? { output: { reply: "", ...extra } } : {}),
    at,
  };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The record fields a finish writes besides status: the reply of a successful run, the error, usage. */
function resultFields(outcome: TurnOutcome, output: RunOutput | undefined): Record<string, string | number> {
  // Set one by one, not spread: docs/development.md, "Copies on the hot path".
  const fields: Record<string, string | number> = {};
  // Only a successful run has a reply; a killed/failed/timed-out one must not report `reply: ""`.
  if (outcome.status === "ok") fields.reply = outcome.reply ?? "";
  if (outcome.error) fields.error = outcome.error;
  if (output?.usage) {
    fields.usageInput = output.usage.input;
    fields.usageOutput = output.usage.output;
  }
  return fields;
}

/** The last `limit` messages before this turn (its own lines, if a re-run wrote any, left out). */
async function historyBefore(svc: WorkerDeps, turn: Turn, limit: number): Promise<TranscriptMessage[]> {
  const entries = await svc.transcripts.tail(turn.agentId, turn.sessionId, limit + 8, topicOpt(turn.sessionKey));
  return entries
    .filter(
      (e) => e.type === "message" && e.runId !== turn.runId && typeof e.message === "object" && e.message !== null,
    )
    .slice(-limit)
    .map((e) => e.message as TranscriptMessage);
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
    private readonly svc: WorkerDeps,
    private readonly running: RunningTurns,
    private readonly tools: ToolInvokerFactory,
    private readonly writer: HolderWriter,
  ) {}

  /**
   * Run `begun`. With `beginNext`, its finish also begins the session's next turn (releasing
   * the lease when there is none), handed back as `next` for the drain to run. A function is
   * asked at the finish (a worker that started shutting down meanwhile begins nothing more).
   */
  async execute(
    begun: BegunTurn,
    lease: LeaseHandle,
    beginNext: boolean | (() => boolean) = false,
  ): Promise<TurnOutcome & { next?: NextTurn }> {
    const { turn } = begun;
    // Registered before the record's cancel flag is looked at: a /stop either finds this turn
    // registered (its broadcast aborts it) or flagged the record before turn-begin read it.
    const controller = this.running.start(turn.sessionKey, turn.runId);
    try {
      return await this.executeRegistered(begun, lease, controller, beginNext);
    } finally {
      this.running.end(turn.sessionKey, turn.runId);
    }
  }

  private async executeRegistered(
    begun: BegunTurn,
    lease: LeaseHandle,
    controller: AbortController,
    beginNext: boolean | (() => boolean),
  ): Promise<TurnOutcome & { next?: NextTurn }> {
    const { svc } = this;
    const { turn, record, entry } = begun;
    if (record?.cancelRequested) controller.abort(new Error(`run ${record.cancelRequested}`));
    if (record && isTerminal(record.status)) {
      // Finished before a crash freed the slot (or killed while queued): just free it now.
      await svc.runs.finish(lease, turn.runId, record.status);
      return { status: record.status, ...(record.reply !== undefined ? { reply: record.reply } : {}) };
    }
    // Telegram forum topics keep their transcript in `<sessionId>-topic-<n>.jsonl`.
    const topic = transcriptTopicOf(turn.sessionKey);
    if (turn.archive) {
      await this.writer.release(turn.agentId, turn.archive.sessionId, topic);
      await svc.transcripts.archive(
        turn.agentId,
        turn.archive.sessionId,
        turn.archive.kind,
        new Date(),
        topicOpt(turn.sessionKey),
      );
      await archiveDone(svc, { ...turn.archive, agentId: turn.agentId, sessionKey: turn.sessionKey });
    }

    // A re-run finds what an earlier attempt left: its lines at the end of the transcript.
    const rerun = (record?.attempts ?? 1) > 1 || record?.resultSaved === true;
    const written = rerun ? await this.writer.linesOfRun(turn.agentId, turn.sessionId, turn.runId, topic) : [];
    // A replayed dead letter may carry the outcome its given-up run had saved: reused, never run again.
    const recovered = record?.resultSaved
      ? savedResult(record)
      : (outcomeFromLines(turn.runId, written) ?? (turn.result ? replayedResult(turn.result) : null));

    let outcome: TurnOutcome;
    let output: RunOutput | undefined;
    let resultAt: number;
    if (recovered) {
      ({ outcome, output, at: resultAt } = recovered);
    } else {
      const result = await this.runRuntime(turn, entry, lease, controller);
      output = result.output;
      outcome = result.outcome;
      resultAt = Date.now();
    }

    const have = new Set(written.map((e) => e.id));
    // Stored with credentials masked (the runtime got the text as sent); ids are unchanged, so the filter holds.
    const lines = redactTranscriptEntries(
      [userEntry(turn), ...resultEntries(turn, outcome, output, resultAt, svc.config.transcripts.redactSecrets)],
      svc.config.transcripts.redactSecrets,
    ).filter((e) => !have.has(e.id));
    if (lines.length) {
      // The file cannot check the fence: write only while the lease is surely still ours,
      // checked again by the writer right before the bytes go out.
      const assertHeld = () => {
        if (!surelyHeld(lease)) throw new StaleFenceError(turn.sessionKey, lease.token, null);
      };
      assertHeld();
      try {
        await this.writer.write(turn.agentId, turn.sessionId, lines, {
          topicId: topic,
          assertHeld,
        });
      } catch (err) {
        // Parked on a storage fault (or retried): keep the outcome so the runtime does not run again.
        if (!recovered) await this.saveResult(turn, lease, outcome, output, resultAt).catch(() => undefined);
        throw err;
      }
    }

    await this.enqueueFollowUps(turn, outcome);
    const begin = typeof beginNext === "function" ? beginNext() : beginNext;
    const { finished, next } = await this.finishWithFlow(begun, lease, outcome, output, begin);
    // The next turn is begun (or the lease released): decode it first so a failure below cannot lose the release.
    const begunNext = begin ? await svc.inbox.fromRaw(next, lease, true) : undefined;
    if (finished) await this.updateSessionAfterRun(turn, entry, outcome, output, resultAt);
    // Object.assign, not a spread: docs/development.md, "Copies on the hot path".
    return begin ? Object.assign({}, outcome, { next: begunNext }) : outcome;
  }

  /**
   * The finish (run-finish.lua), with the agent-to-agent step the outcome leads to applied in
   * the same script: its turns queued atomically with the run turning terminal, its deliveries
   * added just before (ids derived from the runId). The step is decided on the session entries
   * this process knows (the one turn-begin read, the entry cache); the finish checks them and,
   * if one changed, does nothing and hands back the current one to decide again.
   */
  private async finishWithFlow(
    { turn, entryJson }: Pick<BegunTurn, "turn" | "entryJson">,
    lease: LeaseHandle,
    outcome: TurnOutcome,
    output: RunOutput | undefined,
    beginNext: boolean,
    deadLetter?: DeadLetter,
  ): Promise<{ finished: boolean; next: RawBegun | null }> {
    const { svc } = this;
    const flow = a2aStepOf(turn.continuation, turn.runId, outcome);
    const cache = entryCache(svc);
    if (flow && entryJson !== undefined) cache.set(turn.sessionKey, entryJson);
    for (let attempt = 1; ; attempt++) {
      const plan = flow ? await planA2AStep(svc, flow, async (key) => await knownEntry(svc, key)) : undefined;
      const pushes: FinishPush[] = [];
      for (const e of plan?.effects ?? []) {
        if ("deliver" in e) await enqueueOrSettleDelivery(svc, e.deliver, e.entry);
        else
          pushes.push({
            turn: e.push,
            ...(e.ifExists ? { ifExists: e.ifExists } : {}),
            // Into another idle session the finish readies it itself; this session is begun by
            // the finish or chained by the drain, so it never goes on the ready list.
            ready: e.push.sessionKey !== turn.sessionKey && readyWake(svc.config, e.push.sessionKey),
          });
      }
      const res = await svc.runs.finishStep(
        lease,
        turn.runId,
        outcome.status,
        Object.assign(resultFields(outcome, output), plan ? { a2a: JSON.stringify(plan.result) } : {}),
        { beginNext, pushes, expectEntries: plan?.entries ?? [], ...(deadLetter ? { deadLetter } : {}) },
      );
      if ("changed" in res) {
        // Decided on an entry that changed since: decide again on the current one.
        cache.set(res.changed.sessionKey, res.changed.raw);
        if (attempt >= MAX_FLOW_DECISIONS)
          throw new Error(`session ${res.changed.sessionKey} kept changing while run ${turn.runId} finished`);
        continue;
      }
      // Queued into an idle session without readying it: wake its drainer (the script recorded
      // the pending wake, which the overdue-wake check honours if this process dies first). A
      // turn queued into this session and begun by the same finish needs no wake. One that
      // existed was queued by this very finish sent twice (or an earlier attempt): its wake-up
      // may be what the lost answer carried, and a drain job is deduplicated per session.
      for (const [i, p] of pushes.entries())
        if (
          (res.pushed[i] === "wake" || res.pushed[i] === "exists") &&
          !(p.turn.sessionKey === turn.sessionKey && res.next)
        )
          await requestDrain(svc, p.turn.sessionKey);
      return res;
    }
  }

  /**
   * End a turn that will not be retried (storage deadline, a poisoned or repeatedly failing turn):
   * `error` on its record and its message kept as `letter`, with what any failed run leads to: the
   * agent-to-agent flow learns its step failed (a requester that stopped waiting gets the notice),
   * a sub-agent's announce is queued, a reset's retired transcript is archived. Without them a
   * parent waiting for the child would wait for ever. The lease stays held (the drain goes on).
   */
  async giveUp(turn: Turn, lease: LeaseHandle, reason: string, letter: DeadLetter): Promise<void> {
    const outcome: TurnOutcome = { status: "error", error: reason };
    await enqueueArchiveOf(this.svc, turn);
    await this.enqueueFollowUps(turn, outcome);
    await this.finishWithFlow({ turn }, lease, outcome, undefined, false, letter);
  }

  private async runRuntime(
    turn: Turn,
    entryNow: SessionEntry | null,
    lease: LeaseHandle,
    controller: AbortController,
  ): Promise<{ outcome: TurnOutcome; output?: RunOutput }> {
    const { svc } = this;
    // The registered controller is the turn's signal: a lost lease and the run timeout abort it too.
    const unlink = linkSignals(
      controller,
      [lease.lost],
      turn.runTimeoutSeconds && turn.runTimeoutSeconds > 0 ? turn.runTimeoutSeconds * 1000 : undefined,
    );
    const { signal } = controller;
    try {
      const runtime = createRuntime(agentRuntime(svc.config, turn.agentId));
      const tools = this.tools({
        sessionKey: turn.sessionKey,
        agentId: turn.agentId,
        runId: turn.runId,
        sandboxed: entryNow?.sandboxed ?? isAgentSandboxed(svc.config, turn.agentId),
        hop: turn.hop ?? 0,
        ...(turn.traceId ? { traceId: turn.traceId } : {}),
        ...(entryNow?.spawnDepth
          ? {
              spawnDepth: entryNow.spawnDepth,
              ...(entryNow.subagentRole ? { subagentRole: entryNow.subagentRole } : {}),
            }
          : {}),
      });
      const output = await runtime.run({
        runId: turn.runId,
        agentId: turn.agentId,
        sessionKey: turn.sessionKey,
        sessionId: turn.sessionId,
        text: turn.text,
        step: turn.step,
        provenance: turn.provenance,
        ...(turn.source ? { interSession: interSessionProvenance(turn.source) } : {}),
        // The transcript's tail, without anything of this turn (a re-run may have written its user line).
        loadHistory: async () => await historyBefore(svc, turn, HISTORY_LIMIT),
        signal,
        tools,
        ...(turn.extraSystemPrompt ? { extraSystemPrompt: turn.extraSystemPrompt } : {}),
        ...((turn.model ?? entryNow?.modelOverride) ? { model: turn.model ?? entryNow?.modelOverride } : {}),
      });
      if (signal.aborted) throw new RunAbortedError(signal.reason);
      // A yielded turn is ok and has no reply (nothing delivered), whatever text the runtime
      // still returned; the awaited completion is the session's next turn.
      const yielded = output.yielded ?? tools.yielded?.();
      if (yielded) return { outcome: { status: "ok", reply: "" }, output: { ...output, reply: "", yielded } };
      const reply = wellFormed(output.reply);
      return { outcome: { status: "ok", reply }, output: Object.assign({}, output, { reply }) };
    } catch (err) {
      if (lease.lost.aborted) throw new StaleFenceError(turn.sessionKey, lease.token, null);
      // Handed back, not ended: nothing of it is written, the next worker runs it again.
      if (controller.signal.reason instanceof TurnHandedBackError) throw controller.signal.reason;
      if (err instanceof RunAbortedError || signal.aborted) {
        const reason = signal.reason as Error | undefined;
        const timedOut = reason?.name === "TimeoutError";
        return {
          outcome: {
            status: timedOut ? "timeout" : "killed",
            error: timedOut ? "run timed out" : (reason?.message ?? "killed"),
          },
        };
      }
      if (err instanceof StaleFenceError) throw err;
      return { outcome: { status: "error", error: wellFormed((err as Error)?.message ?? String(err)) } };
    } finally {
      unlink();
    }
  }

  /**
   * Save the outcome on the run record before any transcript line is written: from here on a
   * re-run reuses it instead of running the runtime again (its tools, its cost).
   */
  private async saveResult(
    turn: Turn,
    lease: LeaseHandle,
    outcome: TurnOutcome,
    output: RunOutput | undefined,
    at: number,
  ): Promise<void> {
    const extra = {
      ...(output?.toolCalls?.length ? { toolCalls: output.toolCalls } : {}),
      ...(output?.model ? { model: output.model } : {}),
      ...(output?.usage ? { usage: output.usage } : {}),
      ...(output?.yielded ? { yielded: output.yielded } : {}),
    };
    await this.svc.runs.update(lease, turn.runId, {
      resultSaved: 1,
      resultStatus: outcome.status,
      resultAt: at,
      // Tool arguments and results are masked like the transcript lines built from them, so
      // no credential sits on the record either (transcripts.redactSecrets).
      ...(Object.keys(extra).length
        ? { resultOutput: luaSafeJson(this.svc.config.transcripts.redactSecrets ? redactValue(extra) : extra) }
        : {}),
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
    const reply = chatReply(outcome.reply);
    if (outcome.status === "ok" && turn.deliver && reply !== undefined) {
      await enqueueDelivery(svc, {
        id: `reply-${turn.runId}`,
        sessionKey: turn.sessionKey,
        route: turn.deliver,
        message: reply,
        kind: "reply",
      });
    }
    // An agent-to-agent step is applied by the finish itself (finishWithFlow); other
    // continuations (a sub-agent's announce) are jobs.
    if (turn.continuation?.name !== A2A_STEP) await enqueueContinuation(svc, turn, outcome);
  }

  /**
   * Session bookkeeping after a run (aborted flag, model, token counters, the activity of a long
   * run). Skipped when nothing would change, which is every plain short turn after a session's
   * first: no round trip.
   */
  private async updateSessionAfterRun(
    turn: Turn,
    entry: SessionEntry | null,
    outcome: TurnOutcome,
    output: RunOutput | undefined,
    finishedAt: number,
  ): Promise<void> {
    if (!entry || entry.sessionId !== turn.sessionId) return; // rotated meanwhile: stats belong to the old one
    const aborted = outcome.status === "killed" || outcome.status === "timeout";
    const modelChanged = output?.model !== undefined && output.model !== entry.model;
    // The run is activity until it ends (OpenClaw sets updatedAt when the run ends): otherwise a
    // turn longer than the idle window leaves the user's follow-up to its reply in a new session.
    // Its end counts on the clock of its message, as the message did: the message's time plus
    // how long the turn took since it was queued (the run's end itself when the message is
    // stamped now; a replayed or late message does not make the session active now). Written as
    // a turn's activity is (src/rotation/turn-session.ts): only once updatedAt lags by the
    // allowed lag, so a short turn adds no write.
    const endedAt = turn.messageTs + Math.max(0, finishedAt - turn.enqueuedAt);
    const touch = endedAt - lastActivityOf(entry) >= activityEveryMs(entry, cachedStaleAt(this.svc.config, entry));
    if (entry.systemSent && Boolean(entry.abortedLastRun) === aborted && !modelChanged && !output?.usage && !touch)
      return;
    // Run bookkeeping is written without moving activity, but it is what a rollover clears, so a
    // session untouched since its reset (an isolated run's) goes back on the stale clock with it
    // (src/rotation/session-settings.ts). A long run's end moves updatedAt, and with it the stale
    // index, in the same write (updatedAt in the patch only ever moves forward).
    await writeSessionSettings(
      this.svc,
      turn.sessionKey,
      {
        abortedLastRun: aborted,
        systemSent: true,
        ...(output?.model ? { model: output.model } : {}),
        ...(touch ? { updatedAt: endedAt } : {}),
      },
      {
        before: entry,
        // Only into the session the turn ran in: a reset while it ran (`/new`, a stale rotation,
        // sessions.reset) starts a new one with none of these, nor does a delete leave a stub.
        mode: "update",
        expectSessionId: turn.sessionId,
        ...(output?.usage
          ? {
              increment: {
                inputTokens: output.usage.input,
                outputTokens: output.usage.output,
                totalTokens: output.usage.input + output.usage.output,
              },
            }
          : {}),
      },
    ).catch((err: unknown) => {
      if (err instanceof SessionConflictError || err instanceof SessionNotFoundError) return;
      throw err;
    });
  }
}
