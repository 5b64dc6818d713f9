export * from "./types.js";
export { EchoRuntime } from "./echo.js";
export { ScriptRuntime, abortableDelay } from "./script.js";
export {
  OpenAIRuntime,
  OpenAIRuntimeError,
  INTER_SESSION_MARKER,
  buildChatMessages,
  historyToChatMessages,
  markInterSession,
  messageText,
  type OpenAIRuntimeConfig,
  type OpenAIRuntimeOptions,
} from "./openai.js";
export { createRuntime } from "./registry.js";
