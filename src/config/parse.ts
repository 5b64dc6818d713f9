import type { z } from "zod";
import { ConfigError, type ConfigIssue } from "../errors/index.js";
import { ConfigSchema, type Config } from "./schema.js";

/** zod issue paths as `a.b[2].c`, the form operators paste back into their config. */
export function formatIssuePath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += out ? `.${String(seg)}` : String(seg);
  }
  return out || "(root)";
}

export function zodIssues(error: z.ZodError): ConfigIssue[] {
  return error.issues.map((i) => ({ path: formatIssuePath(i.path), message: i.message }));
}

/** Validate raw config input (already parsed from JSON5) and apply defaults. Throws ConfigError. */
export function parseConfig(input: unknown, source?: string): Config {
  const result = ConfigSchema.safeParse(input ?? {});
  if (!result.success) throw new ConfigError(zodIssues(result.error), source);
  return result.data;
}
