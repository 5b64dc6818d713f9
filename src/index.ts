/**
 * Switchboard's library entry (docs/concepts/library.md): the pure session logic, with no Redis and no
 * I/O, for embedding and for tests.
 */
export { parseConfig, ConfigSchema, type Config, type ConfigInput } from "./config/index.js";
export {
  ConfigError,
  SwitchboardError,
  ValidationError,
  InvalidSessionKeyError,
  InvalidAgentIdError,
  InvalidSessionIdError,
} from "./errors/index.js";
export {
  resolveInboundSession,
  canonicalSessionKey,
  resolveResetPolicy,
  evaluateFreshness,
  resolveSendPolicy,
  parseResetTrigger,
  parseChatCommand,
  chatTypeFromKey,
  sessionKindFromKey,
  isValidAgentId,
  isSafeSessionId,
  InboundMessageSchema,
  type InboundMessage,
  type ResetPolicy,
  type Freshness,
} from "./session/index.js";
export { sanitizeHistory } from "./history/sanitize-history.js";
export { sanitizeForHandoff } from "./history/handoff.js";
export type { TranscriptMessage, TranscriptEntry } from "./history/transcript-types.js";
