/**
 * Where transcripts live on shared storage (docs/concepts/sessions.md, "Transcripts"):
 *
 *   <storageDir>/agents/<agentId>/sessions/<sessionId>.jsonl
 *   <storageDir>/agents/<agentId>/sessions/<sessionId>-topic-<encodeURIComponent(topicId)>.jsonl
 *
 * Ids come from the network (tool args, HTTP bodies, imported stores), so they are validated
 * BEFORE any path is built: a rejected id never reaches the file system. The resolved path is
 * then checked to stay inside the storage dir as a second, independent guard (defence in depth
 * against a future change to the regexes).
 */
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { InvalidAgentIdError, InvalidSessionIdError, ValidationError } from "../errors/index.js";
import { MAX_TRANSCRIPT_NAME } from "../session/transcript-topic.js";

/** Lowercase only: file names must not depend on a case-insensitive file system. */
export const AGENT_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** No separators, no leading dot, bounded length. */
export const SESSION_ID_RE = /^[a-z0-9][a-z0-9._-]{0,127}$/;

export type ArchiveKind = "reset" | "deleted";

export function assertAgentId(agentId: unknown): asserts agentId is string {
  if (typeof agentId !== "string" || !AGENT_ID_RE.test(agentId)) throw new InvalidAgentIdError(String(agentId));
}

export function assertSessionId(sessionId: unknown): asserts sessionId is string {
  if (typeof sessionId !== "string" || !SESSION_ID_RE.test(sessionId))
    throw new InvalidSessionIdError(String(sessionId));
}

/**
 * The transcript file name without directory (`<sessionId>.jsonl` or the topic form).
 * Topic ids are free-form (Telegram thread ids, Slack thread timestamps…) so they are
 * URL-encoded like OpenClaw does: encodeURIComponent leaves no `/`, `\` or NUL in the name.
 */
export function transcriptFileName(sessionId: string, topicId?: string | number): string {
  assertSessionId(sessionId);
  if (topicId === undefined) return `${sessionId}.jsonl`;
  const raw = typeof topicId === "number" ? String(topicId) : topicId;
  if (typeof raw !== "string" || raw.length === 0 || (typeof topicId === "number" && !Number.isFinite(topicId))) {
    throw invalidTopic(topicId, "must be a non-empty string or a finite number");
  }
  let encoded: string;
  try {
    encoded = encodeURIComponent(raw);
  } catch {
    // Lone surrogates cannot be encoded: refuse rather than invent a name.
    throw invalidTopic(topicId, "is not valid Unicode");
  }
  const name = `${sessionId}-topic-${encoded}.jsonl`;
  if (name.length > MAX_TRANSCRIPT_NAME) throw invalidTopic(topicId, "is too long for a file name");
  return name;
}

/** `<storageDir>/agents/<agentId>/sessions` after validating the agent id. */
export function sessionsDir(storageDir: string, agentId: string): string {
  assertAgentId(agentId);
  return join(resolve(storageDir), "agents", agentId, "sessions");
}

/**
 * The transcript path for one session (or one of its topics). Throws InvalidAgentIdError,
 * InvalidSessionIdError or ValidationError (topic) without touching the file system.
 */
export function transcriptPath(
  storageDir: string,
  agentId: string,
  sessionId: string,
  topicId?: string | number,
): string {
  const dir = sessionsDir(storageDir, agentId);
  const name = transcriptFileName(sessionId, topicId);
  const file = resolve(dir, name);
  assertInside(storageDir, file);
  // basename must be the name itself: nothing in it was interpreted as a separator.
  if (basename(file) !== name) throw new InvalidSessionIdError(sessionId);
  return file;
}

/** The path relative to the storage dir (`agents/<agentId>/sessions/<name>`), for indexes and logs. */
export function transcriptRelativePath(agentId: string, sessionId: string, topicId?: string | number): string {
  assertAgentId(agentId);
  return `agents/${agentId}/sessions/${transcriptFileName(sessionId, topicId)}`;
}

/**
 * Archive name used on reset/delete (docs/concepts/sessions.md, "Transcripts"):
 * `<file>.reset.2026-05-17T07-35-46.420Z`. Colons are replaced because they are not allowed
 * in file names on every platform/share that may mount the storage.
 */
export function archivePath(file: string, kind: ArchiveKind, now: Date | number = new Date()): string {
  if (kind !== "reset" && kind !== "deleted") throw new ValidationError(`Invalid archive kind ${JSON.stringify(kind)}`);
  const iso = (typeof now === "number" ? new Date(now) : now).toISOString().replace(/:/g, "-");
  return `${file}.${kind}.${iso}`;
}

function assertInside(storageDir: string, file: string): void {
  const rel = relative(resolve(storageDir), file);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) {
    throw new ValidationError(`Transcript path escapes the storage dir: ${JSON.stringify(file)}`);
  }
}

function invalidTopic(topicId: unknown, why: string): ValidationError {
  return new ValidationError(`Invalid topic ID ${JSON.stringify(String(topicId))}: ${why}`, [
    { path: "topicId", message: why },
  ]);
}
