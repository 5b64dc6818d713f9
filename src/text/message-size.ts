/**
 * The one message size limit (docs/concepts/limits.md). Every door — inbound, RPC, session
 * tools, the OpenAI-compatible door — measures a message's text in UTF-8 bytes against the same
 * configured limit and refuses a larger one with the same 413 answer.
 */
import { PayloadTooLargeError } from "../errors/index.js";

/** Default limit of one message's text: 1 MiB of UTF-8. */
export const DEFAULT_MESSAGE_BYTES = 1024 * 1024;

/**
 * Highest limit the config accepts. The zod schemas of message fields cap strings here (in
 * UTF-16 code units), never lower: a string's UTF-8 byte length is never below its code-unit
 * length, so text within any configured byte limit always passes the schemas too.
 */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Room in a request body for the envelope around the message and for JSON escaping. */
const BODY_ENVELOPE_BYTES = 64 * 1024;

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * Default request body limit for a message limit: twice the message (escaped quotes,
 * backslashes and control characters grow in JSON) plus the envelope.
 */
export function defaultBodyBytes(messageBytes: number): number {
  return 2 * messageBytes + BODY_ENVELOPE_BYTES;
}

export interface MessageText {
  /** Where the text sits in the request, for the error message. */
  field: string;
  text: string;
}

/** Session tool arguments that carry a message (to another session, or a sub-agent's task). */
export const TOOL_MESSAGE_FIELDS: readonly string[] = ["message", "task"];

/**
 * The string fields `names` of `o`, each named `<prefix><name>`. A loop, not `flatMap`, which
 * costs about a microsecond a call on Node 20 and runs for every request.
 */
export function messageTextsAt(o: Record<string, unknown>, prefix: string, names: readonly string[]): MessageText[] {
  const out: MessageText[] = [];
  for (const name of names) {
    const text = o[name];
    if (typeof text === "string") out.push({ field: `${prefix}${name}`, text });
  }
  return out;
}

/** The message texts among a session tool's `args`, named `<prefix><field>`. */
export function toolMessageTexts(args: unknown, prefix: string): MessageText[] {
  if (!args || typeof args !== "object" || Array.isArray(args)) return [];
  return messageTextsAt(args as Record<string, unknown>, prefix, TOOL_MESSAGE_FIELDS);
}

/** Throws PayloadTooLargeError for the first text over the limit. */
export function assertMessageSize(limitBytes: number, items: MessageText[]): void {
  for (const { field, text } of items) {
    // Cheap pre-check: UTF-8 never takes more than 3 bytes per UTF-16 code unit.
    if (text.length * 3 <= limitBytes) continue;
    const sizeBytes = utf8Bytes(text);
    if (sizeBytes > limitBytes) throw new PayloadTooLargeError({ field, sizeBytes, limitBytes });
  }
}
