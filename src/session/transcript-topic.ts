/**
 * Telegram forum topics keep their transcript in `<sessionId>-topic-<topicId>.jsonl`, as OpenClaw
 * writes them (so imported topic transcripts and new ones sit side by side). The topic comes
 * from the session key (`…:telegram:group:<chat>:topic:<n>`), so every reader and writer of a
 * session's transcript derives the same file from the key alone. Other threads (`:thread:`)
 * are sessions of their own with ordinary file names.
 */
import { parseThreadSuffix } from "./key-parse.js";
import { threadIdFromKey } from "./key-classify.js";

/**
 * Longest transcript file name accepted. NAME_MAX is 255 bytes on the file systems we care
 * about, and the name must still fit once archived (`.deleted.<24-char ts>` adds 33 chars).
 */
export const MAX_TRANSCRIPT_NAME = 255 - ".deleted.".length - "2026-05-17T07-35-46.420Z".length;

/** The length of the sessionIds Switchboard mints (UUIDs). */
const MINTED_SESSION_ID_LENGTH = 36;

/**
 * Why `sessionKey`'s topic cannot name a transcript file (its `<sessionId>-topic-<encoded>.jsonl`
 * name too long with a minted sessionId, or not encodable), or undefined when it can or the key
 * has no topic. Checked where keys come in, so a session whose every turn would fail on its file
 * name is refused at once instead of accepted.
 */
export function transcriptTopicProblem(sessionKey: string): string | undefined {
  const topicId = transcriptTopicOf(sessionKey);
  if (topicId === undefined) return undefined;
  let encoded: string;
  try {
    encoded = encodeURIComponent(topicId);
  } catch {
    return "its topic id is not valid Unicode";
  }
  const room = MAX_TRANSCRIPT_NAME - MINTED_SESSION_ID_LENGTH - "-topic-.jsonl".length;
  return encoded.length > room
    ? `its topic id is too long for a transcript file name (${encoded.length} characters URL-encoded, at most ${room})`
    : undefined;
}

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
