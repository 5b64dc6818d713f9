import type { z } from "zod";
import { ConfigError, type ConfigIssue } from "../errors/index.js";
import { ConfigSchema, rawCrossFieldIssues, type Config } from "./schema.js";
import { configIssues } from "./config-issues.js";
import { formatIssuePath } from "./parse-path.js";

export function zodIssues(error: z.ZodError): ConfigIssue[] {
  return error.issues.map((i) => ({ path: formatIssuePath(i.path), message: i.message }));
}

/**
 * Every problem at once: the field errors, plus the cross-field checks (run on the raw input,
 * since zod skips the schema's superRefine once a field fails), each path reported once.
 */
function allIssues(input: unknown, error: z.ZodError): ConfigIssue[] {
  const issues = configIssues(error, ConfigSchema, input);
  const reported = new Set(issues.map((i) => i.path));
  for (const extra of rawCrossFieldIssues(input)) {
    const path = formatIssuePath(extra.path);
    if (reported.has(path)) continue;
    reported.add(path);
    issues.push({ path, message: extra.message });
  }
  return issues;
}

/** Validate raw config input (already parsed from JSON5) and apply defaults. Throws ConfigError. */
export function parseConfig(input: unknown, source?: string): Config {
  const result = ConfigSchema.safeParse(input ?? {});
  if (!result.success) throw new ConfigError(allIssues(input ?? {}, result.error), source);
  return result.data;
}
