/**
 * Cancelling a run wherever it executes. BullMQ's `worker.cancelJob` only reaches the local
 * worker, so cancels are broadcast on Redis pub/sub and each worker process aborts the runs it
 * holds for that session.
 */
import type { RedisClient } from "../storage/redis-client.js";
import { keepSubscribed } from "../queues/redis-connections.js";
import type { RedisKeys } from "../storage/redis-keys.js";

export interface CancelMessage {
  sessionKey: string;
  /** Only this run; absent means whatever the session is running now. */
  runId?: string;
  reason: "killed" | "timeout" | "reset";
}

export class CancelBus {
  constructor(
    private readonly publisher: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  async publish(msg: CancelMessage): Promise<number> {
    return await this.publisher.publish(this.keys.cancelChannel(), JSON.stringify(msg));
  }

  /**
   * Subscribe a dedicated connection; `onCancel` runs for every cancel message. A message
   * published while the connection is down is lost (pub/sub keeps nothing), so `onSubscribed`
   * runs after every (re)subscription: the caller checks the runs it holds for a cancel recorded
   * meanwhile (every cancel is also written to the run record).
   */
  static async listen(
    subscriber: RedisClient,
    keys: RedisKeys,
    onCancel: (m: CancelMessage) => void,
    onSubscribed?: () => void,
  ): Promise<void> {
    const channel = keys.cancelChannel();
    subscriber.on("message", (ch: string, raw: string) => {
      if (ch !== channel) return;
      try {
        onCancel(JSON.parse(raw) as CancelMessage);
      } catch {
        // A malformed message is not ours to act on.
      }
    });
    await keepSubscribed(subscriber, channel, onSubscribed);
  }
}
