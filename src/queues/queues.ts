import { Queue, type ConnectionOptions } from "bullmq";
import type { RedisKeys } from "../storage/redis-keys.js";
import { QUEUE_NAMES, type QueueName } from "./queue-names.js";

/** Finished jobs stay visible in Bull Board for a while, bounded so Redis does not grow forever. */
export const DEFAULT_JOB_RETENTION = {
  removeOnComplete: { age: 24 * 3600, count: 5000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 20000 },
};

export type Queues = Record<QueueName, Queue>;

export function createQueues(
  connection: ConnectionOptions,
  keys: RedisKeys,
  onError?: (queue: string, err: Error) => void,
  /**
   * Leave each queue's meta hash alone (a CLI command): BullMQ writes it when a Queue object is
   * made, so a read-only command would otherwise leave keys behind on the Redis it only read.
   * Workers and gateways write it; a job added without it gets BullMQ's default event-stream cap.
   */
  skipMetasUpdate = false,
): Queues {
  const out = {} as Queues;
  for (const name of QUEUE_NAMES) {
    const q = new Queue(name, {
      connection,
      prefix: keys.bullPrefix,
      defaultJobOptions: DEFAULT_JOB_RETENTION,
      ...(skipMetasUpdate ? { skipMetasUpdate } : {}),
    });
    // Without a listener, connection errors during a Redis outage would be unhandled events.
    q.on("error", (err) => onError?.(name, err));
    out[name] = q;
  }
  return out;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.allSettled(Object.values(queues).map((q) => q.close()));
}
