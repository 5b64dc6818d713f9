export * from "./schema.js";
export { parseConfig } from "./parse.js";
export { loadConfig } from "./load.js";
export { defaultAgentId } from "./agents.js";
export { parseRedisUrl } from "./redis-url.js";
