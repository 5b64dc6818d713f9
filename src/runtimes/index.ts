export * from "./types.js";
export { EchoRuntime } from "./echo.js";
export { ScriptRuntime } from "./script.js";
export { OpenAIRuntime, OpenAIRuntimeError, type OpenAIRuntimeConfig } from "./openai.js";
export { createRuntime } from "./registry.js";
