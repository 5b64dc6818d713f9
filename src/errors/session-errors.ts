import { SwitchboardError } from "./switchboard-error.js";

/** A session key that cannot be parsed or canonicalised (empty, `agent::x`, bad agent id…). */
export class InvalidSessionKeyError extends SwitchboardError {
  constructor(key: string, reason: string) {
    super("invalid_session_key", `Invalid session key ${JSON.stringify(key)}: ${reason}`, { key });
  }
}

/** An agent id outside `[a-z0-9][a-z0-9_-]{0,63}`. */
export class InvalidAgentIdError extends SwitchboardError {
  constructor(agentId: string) {
    super(
      "invalid_agent_id",
      `Invalid agentId ${JSON.stringify(agentId)}. Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}.`,
      { agentId },
    );
  }
}

/** A sessionId that would be unsafe as a file name: never turned into a path. */
export class InvalidSessionIdError extends SwitchboardError {
  constructor(sessionId: string) {
    super("invalid_session_id", `Invalid session ID: ${JSON.stringify(sessionId)}`, { sessionId });
  }
}

export class SessionNotFoundError extends SwitchboardError {
  constructor(ref: string, message = `No session found: ${ref}`, details: Record<string, unknown> = { ref }) {
    super("session_not_found", message, details);
  }

  /** OpenClaw's text for a label that names no session: `No session found with label: <label>`. */
  static forLabel(label: string): SessionNotFoundError {
    return new SessionNotFoundError(label, `No session found with label: ${label}`, { label });
  }
}

/** Two sessions claim one label, or one label is asked for twice. */
export class LabelConflictError extends SwitchboardError {
  constructor(label: string, holder: string) {
    super("label_conflict", `Label ${JSON.stringify(label)} is already used by ${holder}`, { label, holder });
  }
}

/** A compare-and-set on the sessionId lost: someone else reset the session first. */
export class SessionConflictError extends SwitchboardError {
  constructor(sessionKey: string, currentSessionId: string) {
    super("session_conflict", `Session ${sessionKey} changed concurrently (now ${currentSessionId || "absent"})`, {
      sessionKey,
      currentSessionId,
    });
  }
}
