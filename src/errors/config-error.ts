import { SwitchboardError } from "./switchboard-error.js";

export interface ConfigIssue {
  path: string;
  message: string;
}

/** An invalid configuration: every problem at once, each as `path: message`. */
export class ConfigError extends SwitchboardError {
  readonly issues: ConfigIssue[];

  constructor(issues: ConfigIssue[], source?: string) {
    const where = source ? ` (${source})` : "";
    super(
      "invalid_config",
      `Invalid config${where}:\n` + issues.map((i) => `  ${i.path}: ${i.message}`).join("\n"),
      { issues },
    );
    this.issues = issues;
  }
}
