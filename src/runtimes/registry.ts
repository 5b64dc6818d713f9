/**
 * Runtime construction from config. Runtimes are stateless between runs, so one instance per
 * config object is shared (cached by object identity; a reloaded config gets new instances).
 */
import type { RuntimeConfig } from "../config/schema.js";
import { EchoRuntime } from "./echo.js";
import { OpenAIRuntime } from "./openai.js";
import { ScriptRuntime } from "./script.js";
import type { AgentRuntime } from "./types.js";

const cache = new WeakMap<RuntimeConfig, AgentRuntime>();

export function createRuntime(cfg: RuntimeConfig): AgentRuntime {
  const cached = cache.get(cfg);
  if (cached) return cached;
  const runtime = build(cfg);
  cache.set(cfg, runtime);
  return runtime;
}

function build(cfg: RuntimeConfig): AgentRuntime {
  switch (cfg.kind) {
    case "echo":
      return new EchoRuntime();
    case "script":
      return new ScriptRuntime(cfg.rules);
    case "openai":
      return new OpenAIRuntime(cfg);
    default: {
      const never: never = cfg;
      throw new Error(`unknown runtime kind: ${JSON.stringify((never as { kind?: unknown }).kind)}`);
    }
  }
}
