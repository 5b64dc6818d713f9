/**
 * Session logic without I/O: keys, inbound routing, classification, send policy.
 * A plain list of re-exports; add new modules' exports below.
 */
export {
  DEFAULT_AGENT_ID,
  DEFAULT_ACCOUNT_ID,
  isValidAgentId,
  normalizeAgentId,
  normalizeAccountId,
  assertAgentId,
} from "./agent-id.js";
export {
  SESSION_ID_PATTERN,
  isSafeSessionId,
  assertSafeSessionId,
  looksLikeSessionId,
  looksLikeSessionKey,
  shouldResolveSessionIdInput,
} from "./session-id.js";
export {
  parseAgentSessionKey,
  stripAgentPrefix,
  classifySessionKeyShape,
  agentIdFromSessionKey,
  isReservedSessionKey,
  parseThreadSuffix,
  type ParsedAgentSessionKey,
  type SessionKeyShape,
  type ThreadSuffix,
} from "./key-parse.js";
export {
  InboundMessageSchema,
  INBOUND_CHAT_TYPES,
  parseInboundMessage,
  type InboundMessage,
  type InboundMessageInput,
} from "./inbound-message.js";
export {
  MAX_SESSION_KEY_LENGTH,
  resolveInboundSession,
  mainSessionKeyFor,
  resolveIdentityLink,
  threadSessionKey,
  subagentSessionKey,
  type InboundSessionInput,
  type InboundSessionResolution,
} from "./key-build.js";
export {
  canonicalSessionKey,
  canonicalizeRestSegments,
  displaySessionKey,
  resolveToolSessionRef,
  type CanonicalKeyOptions,
} from "./key-canonical.js";
export {
  chatTypeFromKey,
  normalizeChatType,
  sessionKindFromKey,
  isThreadSessionKey,
  threadIdFromKey,
  channelFromKey,
  announceTargetFromKey,
  subagentDepthFromKey,
  isSubagentKey,
  isCronRunKey,
  isNonChatRoot,
  restSegments,
  chatMarkerIndex,
  type KeyChatType,
  type SessionKind,
  type AnnounceTarget,
} from "./key-classify.js";
export {
  resolveSendPolicy,
  normalizeSendPolicyOverride,
  INVALID_SEND_POLICY_MESSAGE,
  type SendPolicyDecision,
  type SendPolicyContext,
  type SendPolicyEntry,
} from "./send-policy.js";
export {
  resolveResetPolicy,
  resolveResetType,
  resolveResetChannel,
  hostTimeZone,
  DEFAULT_RESET_AT_HOUR,
  DEFAULT_IDLE_MINUTES,
  type ResetPolicy,
  type ResetMode,
  type ResetType,
  type ResetPolicyContext,
} from "./reset-policy.js";
export {
  evaluateFreshness,
  staleAt,
  mostRecentDailyBoundary,
  nextDailyBoundary,
  type Freshness,
  type FreshnessArgs,
  type StaleReason,
} from "./freshness.js";
export {
  parseResetTrigger,
  parseNewModelHint,
  greetingPrompt,
  currentTimeLine,
  DEFAULT_RESET_TRIGGERS,
  GREETING_PROMPT,
  type ResetTriggerMatch,
  type ModelHint,
} from "./reset-triggers.js";
export { parseChatCommand, SEND_USAGE, type ChatCommand } from "./chat-commands.js";
export {
  findUnsafeChar,
  unsafeCharMessage,
  unsafeCharName,
  escapeUnsafeChars,
  formatCodePoint,
  type UnsafeChar,
  type TextProfile,
  type ScanOptions,
} from "./unsafe-chars.js";
export { refuseUnsafeChars, safeString } from "./safe-text-schema.js";
