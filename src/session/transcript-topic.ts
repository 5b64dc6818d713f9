/**
 * Telegram forum topics keep their transcript in `<sessionId>-topic-<topicId>.jsonl`, as OpenClaw
 * writes them (so imported topic transcripts and new ones sit side by side). The topic comes
 * from the session key (`…:telegram:group:<chat>:topic:<n>`), so every reader and writer of a
 * session's transcript derives the same file from the key alone. Other threads (`:thread:`)
 * are sessions of their own with ordinary file names.
 */
import { parseThreadSuffix } from "./key-parse.js";
import { threadIdFromKey } from "./key-classify.js";

/** The transcript topic of `sessionKey`, or undefined. */
export function transcriptTopicOf(sessionKey: string): string | undefined {
  if (parseThreadSuffix(sessionKey).threadId !== undefined) return undefined;
  return threadIdFromKey(sessionKey);
}

/** `{ topicId }` to spread into a transcript-store call for `sessionKey` (empty when none). */
export function topicOpt(sessionKey: string): { topicId?: string } {
  const topicId = transcriptTopicOf(sessionKey);
  return topicId === undefined ? {} : { topicId };
}
