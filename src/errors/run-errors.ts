import { SwitchboardError } from "./switchboard-error.js";

/**
 * A writer whose fencing token is no longer current: another worker took the session over
 * (lease expired during a GC pause or network blip). The stale holder must stop writing.
 */
export class StaleFenceError extends SwitchboardError {
  constructor(sessionKey: string, token: number, current: number | null) {
    super("stale_fence", `Session ${sessionKey} was taken over (fence ${token}, current ${current ?? "none"})`, {
      sessionKey,
      token,
      current,
    });
  }
}

export class RunNotFoundError extends SwitchboardError {
  constructor(runId: string) {
    super("run_not_found", `No run found: ${runId}`, { runId });
  }
}

/** sendPolicy said deny. Same text as OpenClaw so agents and operators recognise it. */
export class SendBlockedError extends SwitchboardError {
  constructor(sessionKey: string) {
    super("send_blocked", "send blocked by session policy", { sessionKey });
  }
}

export class TranscriptLockError extends SwitchboardError {
  constructor(path: string, waitedMs: number) {
    super("transcript_locked", `Transcript ${path} stayed locked for ${waitedMs} ms`, { path, waitedMs });
  }
}

/**
 * A worker shutting down handed a running turn back: its runtime was interrupted before any
 * transcript line was written, so another worker runs it again from the start.
 */
export class TurnHandedBackError extends SwitchboardError {
  constructor(sessionKey: string, runId: string) {
    super("turn_handed_back", `Turn ${runId} of ${sessionKey} was handed back by a worker shutting down`, {
      sessionKey,
      runId,
    });
  }
}
