export { SwitchboardError } from "./switchboard-error.js";
export { HTTP_STATUS_BY_CODE, ERROR_CODES, httpStatusOf, type ErrorCode } from "./codes.js";
export { SCRIPT_ERRORS, fromScriptError, parseScriptError } from "./script-errors.js";
export { isRedisDown } from "./redis-down.js";
export { REDIS_UNAVAILABLE_MESSAGE, redisFailure } from "./redis-failure.js";
export {
  REDIS_FULL_MESSAGE,
  REDIS_NEARLY_FULL_RATIO,
  isFull,
  isRedisFull,
  redisMemory,
  type RedisMemory,
} from "./redis-full.js";
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
export {
  StaleFenceError,
  RunNotFoundError,
  SendBlockedError,
  TranscriptLockError,
  TurnHandedBackError,
} from "./run-errors.js";
export { PayloadTooLargeError } from "./payload-too-large.js";
