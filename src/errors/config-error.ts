import { SwitchboardError } from "./switchboard-error.js";

export interface ConfigIssue {
  path: string;
  message: string;
}

/** An invalid configuration: every problem at once, each as `path: message`. */
export class ConfigError extends SwitchboardError {
  readonly issues: ConfigIssue[];
  /** The file the config came from, when there was one (printed so people know what to edit). */
  readonly source: string | undefined;

  constructor(issues: ConfigIssue[], source?: string) {
    const where = source ? ` (${source})` : "";
    super("invalid_config", `Invalid config${where}:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join("\n")}`, {
      issues,
    });
    this.issues = issues;
    this.source = source;
  }
}
