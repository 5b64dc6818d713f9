/**
 * Agent ids and account ids: validation and OpenClaw's normalisation (docs/concepts/sessions.md, "Normalisation").
 *
 * Agent ids become Redis key parts and directory names (`agents/<agentId>/sessions`), so
 * anything that reaches storage must pass `assertAgentId`; `normalizeAgentId` exists for the
 * lenient paths (legacy keys, imported data) where upstream also repairs instead of refusing.
 */
import { InvalidAgentIdError } from "../errors/index.js";

export const DEFAULT_AGENT_ID = "main";
export const DEFAULT_ACCOUNT_ID = "default";

/** Upstream tests the id case-insensitively; lowercasing then yields the canonical form. */
const VALID_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/i;
const INVALID_RUN_RE = /[^a-z0-9_-]+/g;
const MAX_ID_LENGTH = 64;

/** True when `value` (trimmed) is an agent id, in any letter case: `my-research_agent01`. */
export function isValidAgentId(value: unknown): value is string {
  if (typeof value !== "string") return false;
  const trimmed = value.trim();
  return trimmed.length > 0 && VALID_ID_RE.test(trimmed);
}

/**
 * The shared repair algorithm: lowercase, runs of invalid characters → `-`, strip leading
 * separators and trailing `-`, truncate to 64, empty → `fallback`.
 * Leading `_` is stripped as well as `-` (upstream strips only `-`), so the result always
 * passes `isValidAgentId`: `_x` would otherwise come out invalid.
 */
function repairId(value: string | null | undefined, fallback: string): string {
  const trimmed = (value ?? "").trim();
  if (!trimmed) return fallback;
  if (VALID_ID_RE.test(trimmed)) return trimmed.toLowerCase();
  const repaired = trimmed
    .toLowerCase()
    .replace(INVALID_RUN_RE, "-")
    .replace(/^[-_]+/, "")
    .slice(0, MAX_ID_LENGTH)
    .replace(/-+$/, "");
  return repaired || fallback;
}

/** `"Agent not found: xyz"` → `agent-not-found-xyz`; empty or all-invalid → `main`. */
export function normalizeAgentId(value: string | null | undefined): string {
  return repairId(value, DEFAULT_AGENT_ID);
}

/** Account ids follow the agent-id algorithm, with `default` as the fallback. */
export function normalizeAccountId(value: string | null | undefined): string {
  return repairId(value, DEFAULT_ACCOUNT_ID);
}

/**
 * Strict gate for ids that will be used in keys and paths: trims and lowercases a valid id,
 * throws InvalidAgentIdError for anything else (never repairs `../../etc/passwd` into `etc-passwd`).
 */
export function assertAgentId(value: unknown): string {
  if (!isValidAgentId(value)) throw new InvalidAgentIdError(typeof value === "string" ? value : String(value));
  return value.trim().toLowerCase();
}
