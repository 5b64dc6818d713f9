import type { AgentEntry, Config, RuntimeConfig } from "./schema.js";

/** Default agent: first `agents.list[]` entry with `default: true`, else the first, else `main`. */
export function defaultAgentId(config: Config): string {
  const list = config.agents.list;
  return (list.find((a) => a.default) ?? list[0])?.id ?? "main";
}

export function findAgent(config: Config, agentId: string): AgentEntry | undefined {
  return config.agents.list.find((a) => a.id === agentId);
}

export function agentRuntime(config: Config, agentId: string): RuntimeConfig {
  return findAgent(config, agentId)?.runtime ?? config.agents.defaults.runtime;
}

export function isAgentSandboxed(config: Config, agentId: string): boolean {
  return findAgent(config, agentId)?.sandboxed ?? false;
}
