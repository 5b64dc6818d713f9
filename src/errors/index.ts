export { SwitchboardError, isSwitchboardError } from "./switchboard-error.js";
export { ConfigError, type ConfigIssue } from "./config-error.js";
export { ValidationError } from "./validation-error.js";
export {
  InvalidSessionKeyError,
  InvalidAgentIdError,
  InvalidSessionIdError,
  SessionNotFoundError,
  LabelConflictError,
  SessionConflictError,
} from "./session-errors.js";
export { StaleFenceError, RunNotFoundError, SendBlockedError, TranscriptLockError, TurnHandedBackError } from "./run-errors.js";
export { PayloadTooLargeError } from "./payload-too-large.js";
