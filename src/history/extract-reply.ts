/**
 * Reply text out of a transcript (docs/concepts/tools.md, "sessions_history" and "sessions_send"):
 * sessions_send returns the target's reply, the announce step and sub-agent completion read
 * the last answer, and the silent tokens decide whether anything is said at all.
 */
import type { TranscriptMessage } from "./transcript-types.js";
import { normalizeAssistantText } from "./normalize-text.js";

// The silent tokens and where they apply: one rule, in silent-reply.ts.
export {
  REPLY_SKIP,
  ANNOUNCE_SKIP,
  NO_REPLY,
  isSilentToken,
  isReplySkip,
  isAnnounceSkip,
  isNoReply,
} from "./silent-reply.js";

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
    if (block && typeof block === "object" && block.type === "text" && typeof block.text === "string")
      out += block.text;
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
