export * from "./queue-names.js";
export { createRedis, type ConnectionRole } from "./redis-connections.js";
export { createQueues, closeQueues, DEFAULT_JOB_RETENTION, type Queues } from "./queues.js";
