/**
 * The one error protocol of the Lua scripts. A script that refuses to act answers an error
 * reply (`redis.error_reply`) whose text is `<CODE>` or `<CODE> <detail>`; the codes are the
 * keys of SCRIPT_ERRORS below, and this is the only place that turns them into typed
 * SwitchboardErrors. Any other reply error (Redis down, NOSCRIPT, a bug) passes through as is.
 *
 * Redis itself prefixes `ERR ` to an error reply without a space (`STALE` arrives as
 * `ERR STALE`), so that prefix is dropped before the code is read.
 */
import { SwitchboardError } from "./switchboard-error.js";
import { LabelConflictError, SessionConflictError, SessionNotFoundError } from "./session-errors.js";
import { StaleFenceError } from "./run-errors.js";

/** What the caller knows that the script's reply does not carry. */
export interface ScriptErrorContext {
  sessionKey: string;
  /** The fencing token the caller wrote with (STALE). */
  token?: number;
  /** The label the caller asked for (ERR_LABEL). */
  label?: string;
}

type ScriptErrorFactory = (ctx: ScriptErrorContext, detail: string) => SwitchboardError;

export const SCRIPT_ERRORS = {
  /** The session lease's fencing token is no longer the caller's (runs/lua/*). */
  STALE: (ctx) => new StaleFenceError(ctx.sessionKey, ctx.token ?? 0, null),
  /** session-upsert: the expected sessionId or rev did not match; detail: the current sessionId. */
  ERR_CONFLICT: (ctx, detail) => new SessionConflictError(ctx.sessionKey, detail),
  /** session-upsert: turns are queued or running (a rotation must wait). */
  ERR_BUSY: (ctx) => new SwitchboardError("session_busy", `Session ${ctx.sessionKey} has turns queued or running`),
  /** session-upsert: the label belongs to another session; detail: that session's key. */
  ERR_LABEL: (ctx, detail) => new LabelConflictError(String(ctx.label), detail || "another session"),
  /** session-upsert in "update" mode: no entry. */
  ERR_MISSING: (ctx) => new SessionNotFoundError(ctx.sessionKey),
  /** session-upsert in "create" mode: the entry exists. */
  ERR_EXISTS: (ctx) => new SwitchboardError("session_exists", `Session already exists: ${ctx.sessionKey}`),
  /** session-upsert: a lineage field would change; detail: the field. */
  ERR_LINEAGE: (ctx, detail) =>
    new SwitchboardError("lineage_immutable", `Session lineage cannot change (${detail}) for ${ctx.sessionKey}`),
  /** session-upsert: the merged entry has no sessionId. */
  ERR_NO_SESSION_ID: (ctx) => new SwitchboardError("invalid_entry", `Session ${ctx.sessionKey} needs a sessionId`),
} as const satisfies Record<string, ScriptErrorFactory>;

export type ScriptErrorCode = keyof typeof SCRIPT_ERRORS;

/** The script's code and detail in a reply error, or undefined when it is not one of ours. */
export function parseScriptError(err: unknown): { code: ScriptErrorCode; detail: string } | undefined {
  // Only a reply from Redis: an error of our own whose text happens to start with a code is not one.
  if (!(err instanceof Error) || err.name !== "ReplyError") return undefined;
  const m = /^(?:ERR )?([A-Z_]+)(?: ([\s\S]*))?$/.exec(err.message);
  if (!m || !Object.hasOwn(SCRIPT_ERRORS, m[1]!)) return undefined;
  return { code: m[1] as ScriptErrorCode, detail: (m[2] ?? "").trim() };
}

/** The typed error for a script's refusal, or `err` itself when it is something else. */
export function fromScriptError(err: unknown, ctx: ScriptErrorContext): unknown {
  const parsed = parseScriptError(err);
  return parsed ? SCRIPT_ERRORS[parsed.code](ctx, parsed.detail) : err;
}
