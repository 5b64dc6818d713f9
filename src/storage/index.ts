export { RedisKeys } from "./redis-keys.js";
export { SessionStore } from "./session-store.js";
