/**
 * Reply text out of a transcript (docs/concepts/tools.md, "sessions_history" and "sessions_send"):
 * sessions_send returns the target's reply, the announce step and sub-agent completion read
 * the last answer, and the silent tokens decide whether anything is said at all.
 */
import type { TranscriptMessage } from "./transcript-types.js";
import { normalizeAssistantText } from "./normalize-text.js";

/** Reply-back step: "do not answer the other session". */
export const REPLY_SKIP = "REPLY_SKIP";
/** Announce step: "post nothing to the channel". */
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
/** Ordinary turn: "say nothing"; such assistant messages are hidden from history. */
export const NO_REPLY = "NO_REPLY";

/**
 * True when `text` is exactly `token` once trimmed, in any case (`" no_reply\n"` is NO_REPLY;
 * `"NO_REPLY, thanks"` is a reply). Non-strings are never silent.
 */
export function isSilentToken(text: unknown, token: string): boolean {
  return typeof text === "string" && text.trim().toLowerCase() === token.toLowerCase();
}

export const isReplySkip = (text: unknown): boolean => isSilentToken(text, REPLY_SKIP);
export const isAnnounceSkip = (text: unknown): boolean => isSilentToken(text, ANNOUNCE_SKIP);
export const isNoReply = (text: unknown): boolean => isSilentToken(text, NO_REPLY);

/**
 * The raw text of a message: string content, or its text blocks joined with nothing in between
 * (providers split one answer into several blocks mid-sentence, so no separator is added).
 */
export function messageRawText(message: Pick<TranscriptMessage, "content">): string {
  const { content } = message;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let out = "";
  for (const block of content) {
    if (block && typeof block === "object" && block.type === "text" && typeof block.text === "string") out += block.text;
  }
  return out;
}

/** What a reader sees of an assistant message: its raw text, normalised and trimmed. */
export function assistantVisibleText(message: Pick<TranscriptMessage, "content">): string {
  return normalizeAssistantText(messageRawText(message)).text.trim();
}

/**
 * The visible text of the newest assistant message of the latest turn, or undefined.
 * Assistant messages without visible text (a tool call alone) and tool results are stepped
 * over; a user message ends the search, so an earlier turn's answer is never taken for the
 * reply to a newer question.
 */
export function latestAssistantText(messages: readonly TranscriptMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const message = messages[i];
    if (!message || typeof message !== "object") continue;
    if (message.role === "user") return undefined;
    if (message.role !== "assistant") continue;
    const text = assistantVisibleText(message);
    if (text) return text;
  }
  return undefined;
}
