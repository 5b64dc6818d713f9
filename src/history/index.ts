/** Pure history sanitising for sessions_history and reply extraction (docs/concepts/tools.md, "sessions_history"). */
export { redactSecrets, maskToken, REDACTION_PATTERN_NAMES } from "./redact.js";
export {
  normalizeAssistantText,
  findCodeRegions,
  isInsideCode,
} from "./normalize-text.js";
export {
  truncateText,
  truncateUtf16Safe,
  jsonBytes,
  capArrayByJsonBytes,
  TRUNCATION_SUFFIX,
} from "./truncate.js";
export {
  sanitizeHistory,
  HISTORY_MAX_BYTES,
  CHAT_HISTORY_OMITTED_TEXT,
  SESSIONS_HISTORY_OMITTED_TEXT,
  type SanitizeHistoryOptions,
} from "./sanitize-history.js";
export {
  latestAssistantText,
  isSilentToken,
  isReplySkip,
  isAnnounceSkip,
  isNoReply,
  REPLY_SKIP,
  ANNOUNCE_SKIP,
  NO_REPLY,
} from "./extract-reply.js";
