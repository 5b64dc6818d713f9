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

/**
 * A config value as a message may show it: booleans, numbers and null as they are, anything else
 * by its kind only (a string in a config may be a token or a URL carrying one).
 */
export function valueKind(v: unknown): string {
  if (typeof v === "boolean" || typeof v === "number" || v === null) return String(v);
  if (Array.isArray(v)) return "a list";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** The raw value at `path`, undefined when the path leads nowhere. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const seg of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg];
  }
  return v;
}

/** What an option of a union expects, in words (`a string`, `false`, `"auto"`). */
function expectedWords(issue: z.core.$ZodIssue): string[] {
  if (issue.code === "invalid_value") return issue.values.map((v) => JSON.stringify(v) ?? String(v));
  if (issue.code !== "invalid_type") return [];
  const words: Record<string, string> = {
    string: "a string",
    number: "a number",
    int: "a whole number",
    boolean: "true or false",
    object: "an object",
    record: "an object",
    array: "a list",
  };
  return [words[issue.expected] ?? issue.expected];
}

/** A union option that failed only because the value is of another kind (its issues are all at its top). */
function wrongKind(branch: readonly z.core.$ZodIssue[]): boolean {
  return branch.every((i) => i.path.length === 0 && (i.code === "invalid_type" || i.code === "invalid_value"));
}

// zod's own messages for these two say neither what is wrong nor what is accepted; a schema's own
// message (a custom `error`) is kept.
const PLAIN_UNION_MESSAGE = "Invalid input";
const PLAIN_KEY_MESSAGE = "Invalid key in record";

/**
 * Every problem as `path: message`. `input` (the raw config) lets a failed union say what it got.
 * A failed union says what its options accept (`expected a string or false (got true)`), or, when
 * the value is of the kind an option takes, that option's own problems (`not a duration: "x"`); a
 * bad record key gives the key schema's message (`not a valid key: lowercase channel id`).
 */
export function configIssues(error: z.ZodError, schema: z.ZodType, input?: unknown): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  const add = (issue: z.core.$ZodIssue, base: readonly PropertyKey[]): void => {
    const path = [...base, ...issue.path];
    if (issue.code === "unrecognized_keys") {
      const known = [...new Set(objectsAt(schema, path).flatMap((d) => Object.keys(d.shape ?? {})))];
      for (const key of issue.keys) {
        const hint = suggestKey(key, known);
        out.push({
          path: formatIssuePath([...path, key]),
          message: hint ? `unknown key (did you mean "${hint}"?)` : "unknown key",
        });
      }
      return;
    }
    if (issue.code === "invalid_key" && issue.message === PLAIN_KEY_MESSAGE && issue.issues.length > 0) {
      out.push({
        path: formatIssuePath(path),
        message: `not a valid key: ${issue.issues.map((i) => i.message).join("; ")}`,
      });
      return;
    }
    if (issue.code === "invalid_union" && issue.message === PLAIN_UNION_MESSAGE && issue.errors.length > 0) {
      const near = issue.errors.filter((branch) => !wrongKind(branch));
      // The value is of a kind one option takes: that option's problems are the ones to fix.
      if (near.length === 1) {
        for (const nested of near[0]!) add(nested, path);
        return;
      }
      if (near.length === 0) {
        const expected = [...new Set(issue.errors.flatMap((branch) => branch.flatMap(expectedWords)))];
        const got = input === undefined ? undefined : valueAt(input, path);
        out.push({
          path: formatIssuePath(path),
          message: `expected ${expected.join(" or ")}${got === undefined ? "" : ` (got ${valueKind(got)})`}`,
        });
        return;
      }
    }
    out.push({ path: formatIssuePath(path), message: issue.message });
  };
  for (const issue of error.issues) add(issue, []);
  return out;
}
