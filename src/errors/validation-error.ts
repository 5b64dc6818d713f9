import { SwitchboardError } from "./switchboard-error.js";
import type { ConfigIssue } from "./config-error.js";

/** Bad input at an API edge (HTTP body, tool args, CLI flags): answered as 400 invalid_request. */
export class ValidationError extends SwitchboardError {
  readonly issues: ConfigIssue[];

  constructor(message: string, issues: ConfigIssue[] = []) {
    super("invalid_request", message, { issues });
    this.issues = issues;
  }
}
