export { RedisKeys } from "./redis-keys.js";
export { SessionStore, LIST_SCAN_LIMIT, type UpsertOptions, type ListQuery } from "./session-store.js";
export { luaCommand, readLua } from "./lua-script.js";
export type { RedisClient } from "./redis-client.js";
