/**
 * Config problems as operators want to read them: one `path: message` per problem, and for a
 * misspelt key the key's own path plus the closest known key at that place
 * (`session.resetTrigers: unknown key (did you mean "resetTriggers"?)`). The known keys are read
 * from the zod schema itself, so the suggestions can never drift from what is accepted.
 */
import type { z } from "zod";
import type { ConfigIssue } from "../errors/index.js";
import { formatIssuePath } from "./parse-path.js";

interface ZodDefLike {
  type?: string;
  shape?: Record<string, unknown>;
  innerType?: unknown;
  in?: unknown;
  element?: unknown;
  valueType?: unknown;
  options?: unknown[];
}

function defOf(schema: unknown): ZodDefLike | undefined {
  return (schema as { _zod?: { def?: ZodDefLike } } | undefined)?._zod?.def;
}

/** The object schemas a value at `path` may be checked against (several under a union). */
function objectsAt(schema: unknown, path: readonly PropertyKey[]): ZodDefLike[] {
  const def = defOf(schema);
  if (!def) return [];
  switch (def.type) {
    case "optional":
    case "default":
    case "prefault":
    case "nullable":
    case "readonly":
    case "catch":
      return objectsAt(def.innerType, path);
    case "pipe":
      return objectsAt(def.in, path);
    case "union":
      return (def.options ?? []).flatMap((o) => objectsAt(o, path));
  }
  if (path.length === 0) return def.type === "object" ? [def] : [];
  const [head, ...rest] = path;
  if (def.type === "object" && typeof head === "string" && def.shape && head in def.shape)
    return objectsAt(def.shape[head], rest);
  if (def.type === "array" && typeof head === "number") return objectsAt(def.element, rest);
  if (def.type === "record") return objectsAt(def.valueType, rest);
  return [];
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length]!;
}

/** The known key closest to `key` (case-insensitive), when it is close enough to be a typo. */
export function suggestKey(key: string, known: readonly string[]): string | undefined {
  let best: { k: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase());
    if (!best || d < best.d) best = { k, d };
  }
  if (!best) return undefined;
  return best.d <= Math.max(2, Math.floor(key.length / 3)) ? best.k : undefined;
}

export function configIssues(error: z.ZodError, schema: z.ZodType): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code !== "unrecognized_keys") {
      out.push({ path: formatIssuePath(issue.path), message: issue.message });
      continue;
    }
    const known = [...new Set(objectsAt(schema, issue.path).flatMap((d) => Object.keys(d.shape ?? {})))];
    for (const key of issue.keys) {
      const hint = suggestKey(key, known);
      out.push({
        path: formatIssuePath([...issue.path, key]),
        message: hint ? `unknown key (did you mean "${hint}"?)` : "unknown key",
      });
    }
  }
  return out;
}
