/** Pure history sanitising for sessions_history and reply extraction (docs/concepts/tools.md, "sessions_history"). */
export { redactSecrets, maskToken, REDACTION_PATTERN_NAMES, type RedactResult } from "./redact.js";
export {
  normalizeAssistantText,
  findCodeRegions,
  isInsideCode,
  type NormalizeResult,
  type CodeRegion,
} from "./normalize-text.js";
export {
  truncateText,
  truncateUtf16Safe,
  jsonBytes,
  capArrayByJsonBytes,
  TRUNCATION_SUFFIX,
  type TruncateResult,
  type CapResult,
} from "./truncate.js";
export {
  sanitizeHistory,
  HISTORY_TEXT_MAX_CHARS,
  HISTORY_MAX_BYTES,
  HISTORY_MESSAGE_MAX_BYTES,
  CHAT_HISTORY_OMITTED_TEXT,
  SESSIONS_HISTORY_OMITTED_TEXT,
  type SanitizeHistoryOptions,
  type SanitizeHistoryResult,
} from "./sanitize-history.js";
export {
  latestAssistantText,
  assistantVisibleText,
  messageRawText,
  isSilentToken,
  isReplySkip,
  isAnnounceSkip,
  isNoReply,
  REPLY_SKIP,
  ANNOUNCE_SKIP,
  NO_REPLY,
} from "./extract-reply.js";
export { sanitizeForHandoff } from "./handoff.js";
