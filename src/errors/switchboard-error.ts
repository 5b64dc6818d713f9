import type { ErrorCode } from "./codes.js";

/**
 * Base of every error Switchboard throws on purpose. `code` is stable and machine-readable
 * (HTTP bodies, CLI exit paths and tests match on it); `message` is for people.
 * `name` is set explicitly so it survives minification and crosses process boundaries in logs.
 */
export class SwitchboardError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.details = details;
    this.name = new.target.name;
    Object.setPrototypeOf(this, new.target.prototype);
  }

  toJSON(): { code: string; message: string } & Record<string, unknown> {
    return { code: this.code, message: this.message, ...(this.details ?? {}) };
  }
}
