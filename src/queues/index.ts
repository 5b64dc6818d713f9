export * from "./queue-names.js";
export { createRedis } from "./redis-connections.js";
export { createQueues, closeQueues, type Queues } from "./queues.js";
