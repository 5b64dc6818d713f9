import { SwitchboardError } from "./switchboard-error.js";
import type { ConfigIssue } from "./config-error.js";

/** Bad input at an API edge (HTTP body, tool args, CLI flags): answered as 400 invalid_request. */
export class ValidationError extends SwitchboardError {
  readonly issues: ConfigIssue[];

  constructor(message: string, issues: ConfigIssue[] = []) {
    super("invalid_request", message, { issues });
    this.issues = issues;
  }

  /** `invalid params for agent: sessionKey: session key contains U+202E … at index 3`: the
   *  first issue in the message itself, so a caller reading only `message` knows what to fix. */
  static fromIssues(what: string, issues: ConfigIssue[]): ValidationError {
    const first = issues[0];
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : "";
    return new ValidationError(first ? `${what}: ${first.path}: ${first.message}${more}` : what, issues);
  }
}
