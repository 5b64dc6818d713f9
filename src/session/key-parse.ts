/**
 * Low-level parsing of session keys (docs/concepts/sessions.md, "Normalisation"). No config and no validation here:
 * these helpers answer "what shape is this string", and the canonicaliser decides what is
 * acceptable. Everything except `parseThreadSuffix` works on the lowercased key.
 */
import { DEFAULT_AGENT_ID, normalizeAgentId } from "./agent-id.js";

export interface ParsedAgentSessionKey {
  agentId: string;
  rest: string;
}

/**
 * `agent:<agentId>:<rest…>` → `{ agentId, rest }`, lowercased, empty segments dropped, at
 * least three segments. `"AGENT:Main:Hook:Webhook:42"` → `{ agentId: "main", rest: "hook:webhook:42" }`.
 * The agent id is returned as written (not validated) so callers can report it.
 */
export function parseAgentSessionKey(key: string | null | undefined): ParsedAgentSessionKey | null {
  const parts = (key ?? "").trim().toLowerCase().split(":").filter(Boolean);
  if (parts.length < 3 || parts[0] !== "agent") return null;
  return { agentId: parts[1] as string, rest: parts.slice(2).join(":") };
}

/** The request-key part: `agent:<id>:` stripped when present, else the whole key (lowercased, trimmed). */
export function stripAgentPrefix(key: string | null | undefined): string {
  const lower = (key ?? "").trim().toLowerCase();
  return parseAgentSessionKey(lower)?.rest ?? lower;
}

export type SessionKeyShape = "missing" | "agent" | "malformed_agent" | "legacy_or_alias";

/** `missing` (empty), `agent`, `malformed_agent` (`agent::broken`, `agent:main`), `legacy_or_alias` (the rest). */
export function classifySessionKeyShape(key: string | null | undefined): SessionKeyShape {
  const lower = (key ?? "").trim().toLowerCase();
  if (!lower) return "missing";
  if (parseAgentSessionKey(lower)) return "agent";
  if (lower.startsWith("agent:")) return "malformed_agent";
  return "legacy_or_alias";
}

/**
 * The agent a key belongs to, or `fallbackAgentId` for bare/alias keys. Like upstream, the
 * parsed id is normalised (so the answer is always a safe id); canonical keys only ever carry
 * valid ids, so this only repairs junk that `canonicalSessionKey` would have refused.
 */
export function agentIdFromSessionKey(
  key: string | null | undefined,
  fallbackAgentId: string = DEFAULT_AGENT_ID,
): string {
  const parsed = parseAgentSessionKey(key);
  return parsed ? normalizeAgentId(parsed.agentId) : fallbackAgentId;
}

/** `global` (scope=global) and `unknown` (no sender) are never listed and never prefixed. */
export function isReservedSessionKey(key: string | null | undefined): boolean {
  const lower = (key ?? "").trim().toLowerCase();
  return lower === "global" || lower === "unknown";
}

export interface ThreadSuffix {
  baseSessionKey: string;
  threadId: string | undefined;
}

const THREAD_MARKER = ":thread:";

/**
 * Splits at the *last* `:thread:` (case-insensitive) and keeps the original case of both parts:
 * `agent:main:slack:channel:General:Thread:1699999999.0001` → base `agent:main:slack:channel:General`,
 * threadId `1699999999.0001`. Telegram `:topic:` is deliberately not a generic suffix.
 */
export function parseThreadSuffix(key: string | null | undefined): ThreadSuffix {
  const raw = (key ?? "").trim();
  const idx = raw.toLowerCase().lastIndexOf(THREAD_MARKER);
  if (idx === -1) return { baseSessionKey: raw, threadId: undefined };
  const threadId = raw.slice(idx + THREAD_MARKER.length).trim();
  return { baseSessionKey: raw.slice(0, idx), threadId: threadId || undefined };
}
