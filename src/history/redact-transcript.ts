/**
 * Secrets are not persisted: before a transcript line is written, every credential-like value in
 * the words of its message (string content, text/thinking blocks, tool-call arguments, tool
 * results and their `details`, error messages, Pi's `command`/`output`/`summary` fields) and of
 * the lines that are not messages (compaction and branch summaries, custom_message content,
 * custom `data`: ENTRY_STRUCTURE_FIELDS) is masked with the same rules sessions_history uses (`sk-pro…5jK0`).
 * The turn that carries the secret still runs with the original text — only what is stored is
 * masked — so later turns, readers and imports never see it. Structural fields (ids, roles,
 * tool names, provenance, timestamps: MESSAGE_STRUCTURE_FIELDS) are never touched. Opt out with
 * `transcripts.redactSecrets: false` (docs/concepts/transcript-redaction.md). Pure: the input
 * lines are not mutated; an unchanged line is returned as is.
 */
import type { TranscriptEntry, TranscriptMessage } from "./transcript-types.js";
import { maskNamedValue, redactSecrets } from "./redact.js";

/** A content block's `type`/`id`/`name` are structure, not words. */
const BLOCK_STRUCTURE = new Set(["type", "id", "name"]);

/**
 * Every string inside `value` (any depth) redacted; the same object when nothing changed. A
 * string under a field whose name says it holds a credential (`apiKey`, `password`,
 * `x-api-key`) is masked whole, and one under an `Authorization` / `Proxy-Authorization` header
 * field (any case) keeps its scheme and has its credentials masked: as a bare value it matches no
 * pattern, its name is the clue (maskNamedValue). `structure`: field names kept as they are (only
 * the top of a content block has them).
 */
function redactDeep(value: unknown, changed: { any: boolean }, structure?: ReadonlySet<string>): unknown {
  if (typeof value === "string") {
    const r = redactSecrets(value);
    if (!r.redacted) return value;
    changed.any = true;
    return r.text;
  }
  if (Array.isArray(value)) {
    const before = changed.any;
    changed.any = false;
    const out = value.map((v) => redactDeep(v, changed, structure));
    const mine = changed.any;
    changed.any = before || mine;
    return mine ? out : value;
  }
  if (value !== null && typeof value === "object") {
    const before = changed.any;
    changed.any = false;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (structure?.has(k)) {
        out[k] = v;
        continue;
      }
      // A value masked when written stays as it is when read back (masking a mask leaves `***`).
      const named = typeof v === "string" ? maskNamedValue(k, v) : undefined;
      if (named === undefined) out[k] = redactDeep(v, changed);
      else {
        out[k] = named;
        if (named !== v) changed.any = true;
      }
    }
    const mine = changed.any;
    changed.any = before || mine;
    return mine ? out : value;
  }
  return value;
}

/** `value` with every string inside it (any depth) redacted, credential-named fields masked. */
export function redactValue<T>(value: T): T {
  return redactDeep(value, { any: false }) as T;
}

/**
 * Message fields that are structure, not words (transcript-types.ts, docs/concepts/transcript-redaction.md): ids,
 * roles, names, flags and numbers of user/assistant/toolResult messages and of Pi's `bashExecution`,
 * `compactionSummary`, `branchSummary` and `custom` messages. Every other string field of a message
 * (`errorMessage`, `command`, `output`, `summary`, `text`, fields nobody knew of) holds words and is masked
 * on write and cleaned by sessions_history.
 */
export const MESSAGE_STRUCTURE_FIELDS: ReadonlySet<string> = new Set([
  "role",
  "timestamp",
  "id",
  "toolCallId",
  "toolName",
  "provenance",
  "api",
  "provider",
  "model",
  "stopReason",
  "usage",
  "cost",
  "isError",
  "idempotencyKey",
  "responseId",
  "customType",
  "display",
  "exitCode",
  "cancelled",
  "truncated",
  "fullOutputPath",
  "excludeFromContext",
  "tokensBefore",
  "fromId",
  "firstKeptEntryId",
  "fromHook",
  "__openclaw",
]);

/**
 * The message with its words masked: `content` (blocks keep their type/id/name), `details` (any depth) and every
 * top-level string field that is not structure. Other fields are not walked, so the cost per line stays one pass
 * over its words.
 */
export function redactTranscriptMessage(message: TranscriptMessage): TranscriptMessage {
  const changed = { any: false };
  let out: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(message)) {
    let next: unknown = value;
    if (key === "content") next = redactDeep(value, changed, BLOCK_STRUCTURE);
    else if (key === "details") next = redactDeep(value, changed);
    else if (typeof value === "string" && !MESSAGE_STRUCTURE_FIELDS.has(key)) {
      next = maskNamedValue(key, value) ?? redactDeep(value, changed);
    }
    if (next !== value) {
      out ??= { ...message };
      out[key] = next;
    }
  }
  return out === undefined ? message : (out as TranscriptMessage);
}

/**
 * Entry fields that are structure, not words: the line's own ids and time, Switchboard's `runId`, the header's
 * `version`/`cwd`/`parentSession`, and the flags, ids and numbers of Pi's other entry types (`compaction`,
 * `branch_summary`, `custom`, `custom_message`, `model_change`, `thinking_level_change`, `label`). Every other
 * field holds words (`summary`, a custom_message's `content`, `data`, `details`, a label's text…) and is masked.
 */
const ENTRY_STRUCTURE_FIELDS: ReadonlySet<string> = new Set([
  "type",
  "id",
  "parentId",
  "timestamp",
  "runId",
  "version",
  "cwd",
  "parentSession",
  "customType",
  "display",
  "fromId",
  "firstKeptEntryId",
  "tokensBefore",
  "fromHook",
  "provider",
  "modelId",
  "thinkingLevel",
  "targetId",
]);

/**
 * A line with its words masked: the `message` as redactTranscriptMessage does it, and every other field that is
 * not structure at any depth (Pi's compaction and branch summaries, a custom_message's `content` blocks, a custom
 * entry's `data`, `details`): they are sent to the model or shown like messages, and an import copies them as
 * they were. Structure only costs a set lookup, so a message line is no slower than before.
 */
function redactTranscriptEntry(entry: TranscriptEntry): TranscriptEntry {
  const changed = { any: false };
  let out: Record<string, unknown> | undefined;
  // for…in, not Object.entries: no array per line for the usual five structural keys (every line passes here).
  for (const key in entry) {
    if (ENTRY_STRUCTURE_FIELDS.has(key) || !Object.hasOwn(entry, key)) continue;
    const value = entry[key];
    if (value === null || value === undefined) continue;
    let next: unknown;
    if (key === "message") {
      if (typeof value !== "object") continue;
      next = redactTranscriptMessage(value as TranscriptMessage);
    } else if (key === "content") next = redactDeep(value, changed, BLOCK_STRUCTURE);
    else next = (typeof value === "string" ? maskNamedValue(key, value) : undefined) ?? redactDeep(value, changed);
    if (next !== value) {
      out ??= { ...entry };
      out[key] = next;
    }
  }
  return out === undefined ? entry : (out as TranscriptEntry);
}

/** The lines as they should be stored: redacted unless `enabled` is false. */
export function redactTranscriptEntries(entries: TranscriptEntry[], enabled: boolean): TranscriptEntry[] {
  if (!enabled) return entries;
  return entries.map(redactTranscriptEntry);
}
