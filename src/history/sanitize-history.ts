/**
 * sessions_history's view of a transcript (docs/concepts/tools.md, "sessions_history"): what the
 * gateway's `chat.history` pass and the tool's own sanitiser do in OpenClaw, as one pure function.
 *
 * Order, and why:
 * 1. select: tool results (`toolResult`/`tool`) go unless `includeTools`; assistant messages
 *    whose visible text is only `NO_REPLY` go (they were never said to anyone);
 * 2. per message: `details`/`usage`/`cost` removed (bulky, and not the reader's business);
 *    assistant text normalised (hidden reasoning and tool scaffolding out; a `<think>` block split
 *    across text blocks is followed from one block to the next); every text field (string content,
 *    block `text`/`thinking`/`partialJson`, and every non-structural string field of the message:
 *    `text`, `errorMessage`, `command`, `output`, `summary`…) redacted, *then* cut to `maxChars`
 *    (redacting first, so a secret straddling the cut is still recognised); every other field of a
 *    block but `type`/`id`/`name` (a tool_use `input`, a nested tool_result `content`) redacted at any
 *    depth, as the writer does;
 *    thinking signatures dropped; image bytes replaced by `{ omitted: true, bytes }`;
 * 3. a message still over 128 KB of JSON (giant tool arguments, hundreds of blocks) becomes a
 *    `[chat.history omitted: message too large]` placeholder, keeping its place in the order;
 * 4. byte cap: oldest messages dropped until the array fits `maxBytes` (newest kept);
 * 5. hard cap: if the one message left is still too big, a fixed placeholder replaces it.
 *
 * The input is never mutated: messages and blocks are shallow-copied before any change.
 */
import type { ContentBlock, TranscriptMessage } from "./transcript-types.js";
import { messageRawText } from "./extract-reply.js";
import { isSilentReply } from "./silent-reply.js";
import { normalizeAssistantBlock, normalizeAssistantText } from "./normalize-text.js";
import { redactSecrets } from "./redact.js";
import { MESSAGE_STRUCTURE_FIELDS, redactValue } from "./redact-transcript.js";
import { capArrayByJsonBytes, jsonBytes, truncateText } from "./truncate.js";

/** Per text field, in UTF-16 units (OpenClaw SESSIONS_HISTORY_TEXT_MAX_CHARS). */
export const HISTORY_TEXT_MAX_CHARS = 4000;
/** Whole result, JSON bytes (OpenClaw SESSIONS_HISTORY_MAX_BYTES). */
export const HISTORY_MAX_BYTES = 80 * 1024;
/** One message, JSON bytes (the gateway's chat.history per-message limit). */
export const HISTORY_MESSAGE_MAX_BYTES = 128 * 1024;
export const CHAT_HISTORY_OMITTED_TEXT = "[chat.history omitted: message too large]";
export const SESSIONS_HISTORY_OMITTED_TEXT = "[sessions_history omitted: message too large]";

export interface SanitizeHistoryOptions {
  /** Keep `toolResult`/`tool` messages (default false). */
  includeTools?: boolean;
  /** Per text field, UTF-16 units (default 4 000). */
  maxChars?: number;
  /** Whole array, JSON bytes (default 80 KiB). */
  maxBytes?: number;
}

export interface SanitizeHistoryResult {
  messages: TranscriptMessage[];
  /** Anything at all was left out: dropped messages, cut content, removed metadata. */
  truncated: boolean;
  /** Messages were dropped by the byte cap or replaced by the hard cap. */
  droppedMessages: boolean;
  /**
   * A text field was cut, a thinking signature or image data removed, or a message replaced by the 128 KB placeholder.
   */
  contentTruncated: boolean;
  /** At least one credential was masked. */
  contentRedacted: boolean;
  /** JSON byte size of `messages`. */
  bytes: number;
}

interface MessageOutcome {
  message: TranscriptMessage;
  contentTruncated: boolean;
  redacted: boolean;
  metadataRemoved: boolean;
}

type MutableRecord = Record<string, unknown>;

const STRIPPED_MESSAGE_FIELDS = ["details", "usage", "cost"] as const;
// Block fields kept as they are (the writer's BLOCK_STRUCTURE) or already redacted by cleanBlock whatever their type.
const BLOCK_KEPT_FIELDS = new Set(["type", "id", "name", "arguments"]);
// Blocks that make an assistant message more than words: a message carrying one is never "silent".
const SILENT_ALLOWED_BLOCK_TYPES = new Set(["text", "thinking"]);

function isObject(value: unknown): value is MutableRecord {
  return typeof value === "object" && value !== null;
}

function isToolMessage(message: unknown): boolean {
  return isObject(message) && (message.role === "toolResult" || message.role === "tool");
}

/** An assistant message whose whole visible text is NO_REPLY (and that called no tool, showed no image…). */
function isSilentAssistantMessage(message: unknown): boolean {
  if (!isObject(message) || message.role !== "assistant") return false;
  const content = (message as TranscriptMessage).content;
  if (Array.isArray(content)) {
    const onlyWords = content.every(
      (block) => isObject(block) && typeof block.type === "string" && SILENT_ALLOWED_BLOCK_TYPES.has(block.type),
    );
    if (!onlyWords) return false;
  } else if (typeof content !== "string") {
    return false;
  }
  const raw = messageRawText(message as TranscriptMessage);
  // Normalisation only removes text: no "no_reply" in the raw text, no NO_REPLY after it (cheap exit on big texts).
  if (!/no_reply/i.test(raw)) return false;
  return isSilentReply("history", normalizeAssistantText(raw).text);
}

function assertPositive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number, got ${value}`);
  return Math.floor(value);
}

function sanitizeMessage(message: TranscriptMessage, maxChars: number): MessageOutcome {
  const entry: MutableRecord = { ...message };
  let contentTruncated = false;
  let redacted = false;
  let metadataRemoved = false;
  const isAssistant = entry.role === "assistant";

  // A reasoning block a provider split across text blocks: each block starts where the previous one ended.
  let insideReasoning = false;
  const cleanText = (text: string, normalize: boolean, carry = false): string => {
    let visible = text;
    if (normalize) {
      if (carry) {
        const block = normalizeAssistantBlock(text, insideReasoning);
        insideReasoning = block.insideReasoning;
        visible = block.text;
      } else visible = normalizeAssistantText(text).text;
    }
    const red = redactSecrets(visible);
    const cut = truncateText(red.text, maxChars);
    redacted ||= red.redacted;
    contentTruncated ||= cut.truncated;
    return cut.text;
  };

  const cleanBlock = (block: unknown): unknown => {
    if (!isObject(block)) return block;
    const out: MutableRecord = { ...block };
    if (typeof out.text === "string") {
      const assistantText = isAssistant && out.type === "text";
      out.text = cleanText(out.text, assistantText, assistantText);
    }
    if (out.type === "thinking") {
      if (typeof out.thinking === "string") out.thinking = cleanText(out.thinking, false);
      // The provider's signature over the reasoning: large, opaque, useless to a reader.
      if ("thinkingSignature" in out) {
        delete out.thinkingSignature;
        contentTruncated = true;
      }
    }
    if (typeof out.partialJson === "string") out.partialJson = cleanText(out.partialJson, false);
    // Tool-call arguments: masked here too (an imported transcript, or redactSecrets off, stores them as sent).
    if (out.arguments !== undefined) {
      const masked = redactValue(out.arguments);
      redacted ||= masked !== out.arguments;
      out.arguments = masked;
    }
    if (out.type === "image") {
      if (typeof out.data === "string") out.bytes = out.data.length; // base64 length, as OpenClaw B-APR reports it
      if ("data" in out) {
        delete out.data;
        contentTruncated = true;
      }
      out.omitted = true;
    }
    // Every other field (a tool_use `input`, a tool_result's nested `content`, fields nobody knew of): the
    // writer's deep redaction, so a transcript stored unmasked (redactSecrets off, another tool) is masked here.
    let rest: MutableRecord | undefined;
    for (const [key, value] of Object.entries(out)) {
      if (BLOCK_KEPT_FIELDS.has(key)) continue;
      // Cleaned above (redacted, then cut to maxChars): only as strings, and `thinking` only in a thinking block.
      if (typeof value === "string" && (key === "text" || key === "partialJson")) continue;
      if (typeof value === "string" && key === "thinking" && out.type === "thinking") continue;
      rest ??= {};
      rest[key] = value;
    }
    if (rest !== undefined) {
      const masked = redactValue(rest);
      if (masked !== rest) {
        redacted = true;
        Object.assign(out, masked);
      }
    }
    return out;
  };

  for (const field of STRIPPED_MESSAGE_FIELDS) {
    if (field in entry) {
      delete entry[field];
      metadataRemoved = true;
    }
  }
  if (typeof entry.content === "string") entry.content = cleanText(entry.content, isAssistant);
  else if (Array.isArray(entry.content)) entry.content = entry.content.map(cleanBlock) as ContentBlock[];
  // Every other word field (`text`, `errorMessage`, Pi's `command`/`output`/`summary`…): redacted and cut too.
  for (const [key, value] of Object.entries(entry)) {
    if (key === "content" || typeof value !== "string" || MESSAGE_STRUCTURE_FIELDS.has(key)) continue;
    entry[key] = cleanText(value, isAssistant && key === "text");
  }

  let result = entry as TranscriptMessage;
  if (jsonBytes(result) > HISTORY_MESSAGE_MAX_BYTES) {
    result = { role: typeof entry.role === "string" ? entry.role : "assistant", content: CHAT_HISTORY_OMITTED_TEXT };
    contentTruncated = true;
  }
  return { message: result, contentTruncated, redacted, metadataRemoved };
}

/** chat.history's whole answer, JSON bytes (OpenClaw's 6 MB cap). */
export const CHAT_HISTORY_MAX_BYTES = 6 * 1024 * 1024;

/**
 * chat.history's byte bounds, OpenClaw's (docs/concepts/tools.md): a message over 128 KB of JSON becomes the
 * `[chat.history omitted: message too large]` placeholder in its place (role and timestamp kept), then the oldest
 * messages are dropped until the array fits `maxBytes`. Nothing else is changed: chat.history is the operators'
 * unsanitised view. Without the bounds one call on a session of big tool outputs answered 100 MB and could reach
 * V8's string limit. Each message is serialised once; the input is not mutated.
 */
export function capChatHistory(
  messages: readonly TranscriptMessage[],
  maxBytes: number = CHAT_HISTORY_MAX_BYTES,
): TranscriptMessage[] {
  const items: TranscriptMessage[] = [];
  const sizes: number[] = [];
  for (const message of messages) {
    let item = message;
    let size = jsonBytes(message) || 4; // `null` inside an array
    if (size > HISTORY_MESSAGE_MAX_BYTES) {
      const role = typeof message.role === "string" ? message.role : "assistant";
      item = { role, content: CHAT_HISTORY_OMITTED_TEXT };
      if (typeof message.timestamp === "number") item.timestamp = message.timestamp;
      size = jsonBytes(item);
    }
    items.push(item);
    sizes.push(size);
  }
  // Every item is at most 128 KB now, so the cap always leaves the newest ones.
  let total = 2 + sizes.reduce((sum, n) => sum + n, 0) + Math.max(0, items.length - 1);
  let start = 0;
  while (total > maxBytes && start < items.length) {
    total -= (sizes[start] ?? 0) + 1;
    start += 1;
  }
  return start === 0 ? items : items.slice(start);
}

/** The sessions_history pipeline (see the file comment). Pure: no I/O, input untouched. */
export function sanitizeHistory(
  messages: readonly TranscriptMessage[],
  opts: SanitizeHistoryOptions = {},
): SanitizeHistoryResult {
  const maxChars = assertPositive("maxChars", opts.maxChars ?? HISTORY_TEXT_MAX_CHARS);
  const maxBytes = assertPositive("maxBytes", opts.maxBytes ?? HISTORY_MAX_BYTES);

  const selected = messages.filter(
    (m) => (opts.includeTools === true || !isToolMessage(m)) && !isSilentAssistantMessage(m),
  );

  let contentTruncated = false;
  let contentRedacted = false;
  let metadataRemoved = false;
  const sanitized = selected.map((message) => {
    if (!isObject(message)) return message; // not a message: passed through, as OpenClaw does
    const outcome = sanitizeMessage(message, maxChars);
    contentTruncated ||= outcome.contentTruncated;
    contentRedacted ||= outcome.redacted;
    metadataRemoved ||= outcome.metadataRemoved;
    return outcome.message;
  });

  const capped = capArrayByJsonBytes(sanitized, maxBytes);
  let items = capped.items;
  let bytes = capped.bytes;
  let hardCapped = false;
  if (bytes > maxBytes) {
    // The byte cap stops at one message, so here that one is too big by itself; the "keep the
    // last if it fits" branch mirrors OpenClaw's hard cap and guards a cap that stops earlier.
    hardCapped = true;
    const last = items.at(-1);
    const lastOnly = last === undefined ? [] : [last];
    const lastBytes = jsonBytes(lastOnly);
    if (lastBytes <= maxBytes) {
      items = lastOnly;
      bytes = lastBytes;
    } else {
      items = [{ role: "assistant", content: SESSIONS_HISTORY_OMITTED_TEXT }];
      bytes = jsonBytes(items);
    }
  }

  const droppedMessages = capped.items.length < selected.length || hardCapped;
  return {
    messages: items,
    truncated: droppedMessages || contentTruncated || hardCapped || metadataRemoved,
    droppedMessages,
    contentTruncated,
    contentRedacted,
    bytes,
  };
}
