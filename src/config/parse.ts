import type { z } from "zod";
import { ConfigError, type ConfigIssue } from "../errors/index.js";
import { ConfigSchema, type Config } from "./schema.js";
import { configIssues } from "./config-issues.js";
import { formatIssuePath } from "./parse-path.js";

export function zodIssues(error: z.ZodError): ConfigIssue[] {
  return error.issues.map((i) => ({ path: formatIssuePath(i.path), message: i.message }));
}

/** Validate raw config input (already parsed from JSON5) and apply defaults. Throws ConfigError. */
export function parseConfig(input: unknown, source?: string): Config {
  const result = ConfigSchema.safeParse(input ?? {});
  if (!result.success) throw new ConfigError(configIssues(result.error, ConfigSchema), source);
  return result.data;
}
