/**
 * Session logic without I/O: keys, inbound routing, classification, send policy.
 * A plain list of re-exports; add new modules' exports below.
 */
export {
  isValidAgentId,
  normalizeAgentId,
  normalizeAccountId,
  assertAgentId,
} from "./agent-id.js";
export {
  isSafeSessionId,
  assertSafeSessionId,
  looksLikeSessionId,
  looksLikeSessionKey,
  shouldResolveSessionIdInput,
} from "./session-id.js";
export {
  parseAgentSessionKey,
  classifySessionKeyShape,
  agentIdFromSessionKey,
  isReservedSessionKey,
  parseThreadSuffix,
} from "./key-parse.js";
export {
  InboundMessageSchema,
  parseInboundMessage,
  type InboundMessage,
} from "./inbound-message.js";
export {
  resolveInboundSession,
  threadSessionKey,
  subagentSessionKey,
  type InboundSessionInput,
} from "./key-build.js";
export {
  canonicalSessionKey,
  displaySessionKey,
  resolveToolSessionRef,
} from "./key-canonical.js";
export {
  chatTypeFromKey,
  sessionKindFromKey,
  isThreadSessionKey,
  threadIdFromKey,
  channelFromKey,
  announceTargetFromKey,
  subagentDepthFromKey,
  isSubagentKey,
  isCronRunKey,
} from "./key-classify.js";
export {
  resolveSendPolicy,
  normalizeSendPolicyOverride,
  type SendPolicyContext,
} from "./send-policy.js";
export {
  resolveResetPolicy,
  type ResetPolicy,
} from "./reset-policy.js";
export {
  evaluateFreshness,
  type Freshness,
} from "./freshness.js";
export { parseResetTrigger } from "./reset-triggers.js";
export { parseChatCommand } from "./chat-commands.js";
export {
  findUnsafeChar,
  unsafeCharMessage,
  unsafeCharName,
  escapeUnsafeChars,
  formatCodePoint,
} from "./unsafe-chars.js";
export { safeString } from "./safe-text-schema.js";
