/**
 * Run records: the status of every run (queued → running → ok|error|timeout|killed), answered
 * by any gateway from Redis. Writes by a lease holder are fenced; the terminal write also frees
 * the in-flight slot and notifies waiters in the same script (run-finish.lua).
 */
import { randomBytes } from "node:crypto";

/** A finished record's field longer than this goes as its own argument, not inside the JSON list. */
const LONG_FIELD_CHARS = 200;
/**
 * A finish call's nonce (run-finish.lua): unique per call, not secret, so a random prefix per
 * process and a counter serve (no random bytes drawn per turn).
 */
const FINISH_NONCE_PREFIX = randomBytes(6).toString("base64url");
let finishCalls = 0;
import type { RedisClient } from "../storage/redis-client.js";
import type { Config } from "../config/schema.js";
import { fromScriptError } from "../errors/index.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { LeaseHandle } from "./session-lease.js";
import type { DeadLetter } from "./dead-letters.js";
import { pendingWakeMember, pendingWakeSuffix } from "./pending-wakes.js";
import { luaSafeJson } from "../text/well-formed.js";
import { isTerminal, serializeTurn, type RunStatus, type TerminalStatus, type Turn } from "./turn.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

/** Run records stay readable this long after they are written or finished: `maintenance.runRecordTtlMs`'s default. */
export const RUN_RECORD_TTL_SECONDS = 7 * 24 * 3600;

/** `maintenance.runRecordTtlMs` in the seconds Redis's EXPIRE takes. */
export function runRecordTtlSeconds(config: Pick<Config, "maintenance">): number {
  return Math.ceil(config.maintenance.runRecordTtlMs / 1000);
}

export interface RunRecord {
  runId: string;
  sessionKey: string;
  agentId?: string;
  sessionId?: string;
  step?: string;
  status: RunStatus;
  reply?: string;
  error?: string;
  createdAt?: number;
  startedAt?: number;
  endedAt?: number;
  /** When the record turned terminal, by Redis's clock (set by the finish; endedAt is the worker's). */
  terminalAt?: number;
  usage?: { input: number; output: number };
  attempts?: number;
  sourceSessionKey?: string;
  traceId?: string;
  /** The result is saved (outcome, reply, usage) even if the record is not terminal yet. */
  resultSaved?: boolean;
  resultStatus?: TerminalStatus;
  /** Set by `/stop` for a run that may not have registered with its worker yet. */
  cancelRequested?: string;
  resultError?: string;
  /** When the result was saved (ms), and the runtime output needed to rewrite its lines (JSON). */
  resultAt?: number;
  resultOutput?: string;
  /** Why a non-terminal run is not progressing (storage fault): told to callers who time out. */
  stalledReason?: string;
  /** The last attempt parked on a storage fault (src/runs/storage-faults.ts): the begin after it is no redelivery. */
  parkedAttempt?: number;
  /** The run ended its turn through sessions_yield (its message): it is `ok` with no reply. */
  yielded?: string;
  /** The agent-to-agent step its finish applied (JSON: `{ next }` or `{ done }`), when it followed one. */
  a2a?: string;
}

export interface FinishOptions {
  deadLetter?: DeadLetter;
}

/** A turn the finish queues in the same step (the next agent-to-agent step), once per runId. */
export interface FinishPush {
  turn: Turn;
  /** Queued only if this key exists when the run turns terminal (a sessions_send caller's late flag). */
  ifExists?: string;
  /** Put the session on the ready list if the push finds it idle (readyWake), instead of a drain job. */
  ready?: boolean;
}

/**
 * What a push in the finish did: like `Inbox.push`, or `skipped` (its condition did not hold, or
 * the run had ended already).
 */
export type PushResult = "ready" | "wake" | "queued" | "exists" | "skipped";

/** A session entry the pushes were decided on, as the worker knew it (null: no such session). */
export interface ExpectedEntry {
  sessionKey: string;
  raw: string | null;
}

export interface FinishStepOptions extends FinishOptions {
  /** Begin the session's next turn in the same step (and release the lease when there is none). */
  beginNext: boolean;
  pushes: FinishPush[];
  expectEntries: ExpectedEntry[];
}

export type FinishStepResult =
  | { finished: boolean; next: RawBegun | null; pushed: PushResult[] }
  /** An expected entry changed: nothing was done; `raw` is the current one. */
  | { changed: ExpectedEntry };

/** A turn as begin-next.lua returns it: its JSON, its record's field/value list, its session entry JSON. */
export type RawBegun = [string, string[], string | null];

export class RunRecords {
  private readonly updateLua;
  private readonly finishLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** The records' TTL (`runRecordTtlSeconds(config)`), also given to what lives as long. */
    readonly ttlSeconds: number = RUN_RECORD_TTL_SECONDS,
  ) {
    this.updateLua = luaCommand(redis, LUA_DIR, "run-update");
    this.finishLua = luaCommand(redis, LUA_DIR, "run-finish");
  }

  async get(runId: string): Promise<RunRecord | null> {
    const h = await this.redis.hgetall(this.keys.run(runId));
    return Object.keys(h).length ? decodeRecord(h) : null;
  }

  /** Fenced partial update by the lease holder. */
  async update(lease: LeaseHandle, runId: string, fields: Record<string, string | number>): Promise<void> {
    const flat: string[] = [];
    for (const k of Object.keys(fields)) flat.push(k, String(fields[k]));
    try {
      await this.updateLua([lease.fenceKey, this.keys.run(runId)], [lease.token, ...flat]);
    } catch (err) {
      throw fromScriptError(err, lease);
    }
  }

  /**
   * Terminal write + in-flight pop + notification, atomically. Returns false if already
   * terminal. `deadLetter` keeps the message as a dead letter in the same step. The notification
   * carries the finished record, read back inside the script (see `notificationRecord`), so
   * waiters need not read it and the record crosses the wire once.
   */
  async finish(
    lease: LeaseHandle,
    runId: string,
    status: TerminalStatus,
    fields: Record<string, string | number> = {},
    opts: FinishOptions = {},
  ): Promise<boolean> {
    return (await this.runFinish(lease, runId, status, fields, opts, false)) === 1;
  }

  /**
   * `finish`, plus in the same script: the turns its outcome leads to (`pushes`, each once per
   * runId; see run-finish.lua), and with `beginNext` the session's next turn (one round trip per
   * turn for a busy session; with nothing left the lease is released). The pushes were decided
   * on `expectEntries`; if one of them changed, nothing is done and the current entry comes back.
   */
  async finishStep(
    lease: LeaseHandle,
    runId: string,
    status: TerminalStatus,
    fields: Record<string, string | number>,
    opts: FinishStepOptions,
  ): Promise<FinishStepResult> {
    const res = (await this.runFinish(lease, runId, status, fields, opts, opts.beginNext, opts)) as
      | number
      | [number, RawBegun | null, number[]];
    if (typeof res === "number") return { finished: res === 1, next: null, pushed: [] };
    if (res[0] === -1) {
      const i = (res[1] as unknown as number) - 1;
      return { changed: { sessionKey: opts.expectEntries[i]!.sessionKey, raw: (res[2] as unknown as string) ?? null } };
    }
    const codes = res[2] ?? [];
    return {
      finished: res[0] === 1,
      next: res[1] || null,
      pushed: opts.pushes.map((_, i) => PUSH_RESULTS[String(codes[i])] ?? "skipped"),
    };
  }

  private async runFinish(
    lease: LeaseHandle,
    runId: string,
    status: TerminalStatus,
    fields: Record<string, string | number>,
    opts: FinishOptions,
    beginNext: boolean,
    step: { pushes: FinishPush[]; expectEntries: ExpectedEntry[] } = { pushes: [], expectEntries: [] },
  ): Promise<unknown> {
    // Short fields in one JSON list (one argument: ioredis pays per argument); long ones (a reply,
    // a saved output) as field, value arguments of their own, which the script need not decode.
    const flat: string[] = [];
    const long: string[] = [];
    for (const k in fields) {
      if (k === "status" || k === "endedAt") continue;
      const v = String(fields[k]);
      (v.length > LONG_FIELD_CHARS ? long : flat).push(k, v);
    }
    flat.push("status", status, "endedAt", String(fields.endedAt ?? Date.now()));
    // New per call: the same finish sent again by the client is answered as it was (run-finish.lua).
    flat.push("finishedBy", `${FINISH_NONCE_PREFIX}${(++finishCalls).toString(36)}`);
    const now = Date.now();
    const keys = [
      lease.fenceKey,
      this.keys.run(runId),
      this.keys.inflight(lease.sessionKey),
      this.keys.deadLetters(),
      this.keys.inbox(lease.sessionKey),
      this.keys.session(lease.sessionKey),
      this.keys.pendingWakes(),
      this.keys.readyList(),
      this.keys.inboxBytes(lease.sessionKey),
      ...step.expectEntries.map((e) => this.keys.session(e.sessionKey)),
    ];
    const pushArgs: string[] = [];
    for (const p of step.pushes) {
      const runKey = this.keys.run(p.turn.runId);
      keys.push(
        runKey,
        this.keys.inbox(p.turn.sessionKey),
        this.keys.inflight(p.turn.sessionKey),
        this.keys.inboxBytes(p.turn.sessionKey),
        p.ifExists ?? runKey,
      );
      pushArgs.push(
        serializeTurn(p.turn),
        pendingWakeMember(p.turn),
        `${p.ifExists ? "c" : ""}${p.ready ? "r" : ""}`,
        luaSafeJson(queuedRecordFields(p.turn)),
      );
    }
    // After the push keys: the dead letter's index, written with the letter, and the sessions that
    // may have work, which a push into an idle session joins (run-finish.lua).
    keys.push(this.keys.deadLetterIndex(), this.keys.workSessions());
    try {
      return await this.finishLua(keys, [
        lease.token,
        runId,
        this.keys.runDoneChannel(),
        this.ttlSeconds,
        opts.deadLetter ? luaSafeJson(opts.deadLetter) : "",
        beginNext ? "1" : "0",
        this.keys.run(""),
        now,
        beginNext ? "1" : "0",
        pendingWakeSuffix(lease.sessionKey),
        step.expectEntries.length,
        step.pushes.length,
        lease.wake ?? "",
        opts.deadLetter ? String(opts.deadLetter.failedAt) : "",
        ...step.expectEntries.map((e) => e.raw ?? ""),
        ...pushArgs,
        luaSafeJson(flat),
        ...long,
      ]);
    } catch (err) {
      throw fromScriptError(err, lease);
    }
  }

  /**
   * Record that a run should stop. The cancel broadcast only reaches a run already registered
   * with its worker; a run taken but not yet started checks this flag when it starts.
   */
  async requestCancel(runId: string, reason: string): Promise<void> {
    const key = this.keys.run(runId);
    // Only on an existing record: never create a stray hash without a TTL.
    if (await this.redis.exists(key)) await this.redis.hset(key, "cancelRequested", reason);
  }
}

/** The push scripts' answers (push-turn.lua), by code. */
export const PUSH_RESULTS: Record<string, PushResult> = {
  "3": "ready",
  "2": "wake",
  "1": "queued",
  "0": "exists",
  "-1": "skipped",
};

/** The record of a turn just queued, as a field/value list (push-turn.lua writes it). */
export function queuedRecordFields(turn: Turn): string[] {
  const fields = [
    "runId",
    turn.runId,
    "sessionKey",
    turn.sessionKey,
    "agentId",
    turn.agentId,
    "sessionId",
    turn.sessionId,
    "step",
    turn.step,
    "status",
    "queued",
    "createdAt",
    String(turn.enqueuedAt),
  ];
  if (turn.source) fields.push("sourceSessionKey", turn.source.sessionKey, "sourceTool", turn.source.tool);
  if (turn.traceId) fields.push("traceId", turn.traceId);
  return fields;
}

function num(v: string | undefined): number | undefined {
  return v === undefined || v === "" ? undefined : Number(v);
}

/**
 * Who reads a record. `caller` (agent.wait, GET /v1/runs, sessions_send, run-done notices): a
 * `reply` only on a run whose status is `ok`. `worker` (the turn a worker begins, read in its
 * begin script): also the reply an earlier attempt saved on a run that is not finished yet, which
 * a re-run finishes with (a parked turn); it may still end otherwise, so callers never see it.
 */
export type RecordView = "caller" | "worker";

/**
 * A record from a flat `[field, value, …]` list: what HGETALL returns inside a script (a worker's
 * view by default), and what a finish publishes after the runId (run-finish.lua; decode it with
 * `notificationRecord`).
 */
export function recordFromPairs(pairs: string[], view: RecordView = "worker"): RunRecord | null {
  if (pairs.length === 0) return null;
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) h[pairs[i]!] = pairs[i + 1]!;
  return decodeRecord(h, view);
}

/** The finished record a run-done notification carries after `<runId>\n` (null: unreadable). */
export function notificationRecord(json: string): RunRecord | null {
  try {
    const pairs: unknown = JSON.parse(json);
    return Array.isArray(pairs) && pairs.every((v) => typeof v === "string") ? recordFromPairs(pairs, "caller") : null;
  } catch {
    return null;
  }
}

export function decodeRecord(h: Record<string, string>, view: RecordView = "caller"): RunRecord {
  const rec: RunRecord = {
    runId: h.runId ?? "",
    sessionKey: h.sessionKey ?? "",
    status: (h.status ?? "queued") as RunStatus,
  };
  if (h.agentId) rec.agentId = h.agentId;
  if (h.sessionId) rec.sessionId = h.sessionId;
  if (h.step) rec.step = h.step;
  // Only an `ok` run has a reply: not one given up as an error after its result was saved, nor
  // one still running (see RecordView for the worker's exception).
  if (h.reply !== undefined) {
    const savedOk = h.resultSaved === "1" && (h.resultStatus ?? "ok") === "ok" && !isTerminal(h.status);
    if (rec.status === "ok" || (view === "worker" && savedOk)) rec.reply = h.reply;
  }
  if (h.error) rec.error = h.error;
  const createdAt = num(h.createdAt);
  if (createdAt !== undefined) rec.createdAt = createdAt;
  const startedAt = num(h.startedAt);
  if (startedAt !== undefined) rec.startedAt = startedAt;
  const endedAt = num(h.endedAt);
  if (endedAt !== undefined) rec.endedAt = endedAt;
  const terminalAt = num(h.terminalAt);
  if (terminalAt !== undefined) rec.terminalAt = terminalAt;
  if (h.usageInput !== undefined || h.usageOutput !== undefined) {
    rec.usage = { input: Number(h.usageInput ?? 0), output: Number(h.usageOutput ?? 0) };
  }
  const attempts = num(h.attempts);
  if (attempts !== undefined) rec.attempts = attempts;
  if (h.sourceSessionKey) rec.sourceSessionKey = h.sourceSessionKey;
  if (h.traceId) rec.traceId = h.traceId;
  if (h.resultSaved === "1") rec.resultSaved = true;
  if (h.resultStatus && isTerminal(h.resultStatus)) rec.resultStatus = h.resultStatus;
  if (h.resultError) rec.resultError = h.resultError;
  const resultAt = num(h.resultAt);
  if (resultAt !== undefined) rec.resultAt = resultAt;
  if (h.resultOutput) rec.resultOutput = h.resultOutput;
  if (h.cancelRequested) rec.cancelRequested = h.cancelRequested;
  if (h.stalledReason && !isTerminal(h.status)) rec.stalledReason = h.stalledReason;
  const parkedAttempt = num(h.parkedAttempt);
  if (parkedAttempt !== undefined) rec.parkedAttempt = parkedAttempt;
  if (h.yielded !== undefined) rec.yielded = h.yielded;
  if (h.a2a) rec.a2a = h.a2a;
  return rec;
}
