export * from "./schema.js";
export { parseConfig, formatIssuePath, zodIssues } from "./parse.js";
export { loadConfig, expandHome, defaultConfigPath, readConfigFile, applyEnvOverrides, type LoadedConfig } from "./load.js";
export { defaultAgentId, findAgent, agentRuntime, isAgentSandboxed } from "./agents.js";
export { parseRedisUrl, type RedisTarget, type ClusterRedisTarget, type SingleRedisTarget } from "./redis-url.js";
