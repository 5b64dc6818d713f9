/**
 * SessionIds name transcript files (`<storage>/agents/<a>/sessions/<sessionId>.jsonl`), so the
 * only safe ones are a closed, lowercase, separator-free alphabet (stricter than OpenClaw's
 * case-insensitive check; docs/concepts/sessions.md, "Normalisation"). Anything else is refused, never turned into a
 * path.
 *
 * Also here: the tools layer's shape heuristics (docs/concepts/sessions.md, "Keys and sessionIds in tool input")
 * deciding whether a tool
 * argument is a sessionId (UUID) or a session key.
 */
import { InvalidSessionIdError } from "../errors/index.js";
import { parseAgentSessionKey } from "./key-parse.js";

export const SESSION_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,127}$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * True when `value` is usable as a file name. The pattern already forbids `/`, `\`, a leading
 * dot, `.` and `..`; `..` anywhere is refused too so no later path join can ever see a
 * parent-directory token, even if the id is embedded in a longer name.
 */
export function isSafeSessionId(value: unknown): value is string {
  return typeof value === "string" && SESSION_ID_PATTERN.test(value) && !value.includes("..");
}

/** Returns the id unchanged, or throws InvalidSessionIdError. No trimming or lowercasing: an id is exact. */
export function assertSafeSessionId(value: unknown): string {
  if (!isSafeSessionId(value)) throw new InvalidSessionIdError(typeof value === "string" ? value : String(value));
  return value;
}

/** RFC-4122-shaped UUID, any case. */
export function looksLikeSessionId(value: string): boolean {
  return UUID_RE.test(value.trim());
}

const RESERVED_REFS = new Set(["main", "global", "unknown", "current"]);
const KEY_PREFIXES = ["agent:", "cron:", "hook:", "node-", "node:", "acp:"];

/**
 * Session-key-shaped input: a reserved word, an ACP key, a known prefix, or a group/channel
 * marker. Anything else (`random-slug`) is a sessionId candidate for the resolver.
 */
export function looksLikeSessionKey(value: string): boolean {
  const v = value.trim().toLowerCase();
  if (!v) return false;
  if (RESERVED_REFS.has(v)) return true;
  if (KEY_PREFIXES.some((p) => v.startsWith(p))) return true;
  if (parseAgentSessionKey(v)?.rest.startsWith("acp:")) return true;
  return v.includes(":group:") || v.includes(":channel:");
}

/** Upstream's rule for trying a sessionId lookup: a UUID, or anything not key-shaped. */
export function shouldResolveSessionIdInput(value: string): boolean {
  return looksLikeSessionId(value) || !looksLikeSessionKey(value);
}
