/**
 * Which queues of turns an operator has paused (Bull Board's pause, `Queue.pause()`), as a worker
 * sees it: BullMQ stops handing out a paused queue's jobs by itself, but a drain runs a session's
 * turns one after another inside one job, and a ready-list drain is no job at all. So drains ask
 * here between turns, and the ready-list consumer before it pops (docs/concepts/reliability.md,
 * "Operator actions in Bull Board"). Pausing `runs` holds the sessions woken from the ready list
 * too; `subagents` holds its own drain jobs.
 *
 * Read from BullMQ's own flag (the `paused` field of the queue's meta hash, set and cleared by its
 * pause script) every POLL_MS, on the process's command connection: two HGETs a second per worker,
 * nothing on a turn's path. A pause takes effect within about that long. A drain that finds the
 * copy set reads the flag again before it stops (a resume is seen at once); a failed read keeps
 * the last answer (Redis away stops the turns anyway).
 */
import type { QueueName } from "../queues/queue-names.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { HoldCheck } from "./drain.js";

/** How often the flags are read: also about how long a pause or resume takes to be seen. */
export const PAUSE_POLL_MS = 1000;

/** The queues whose jobs run sessions' turns (drain jobs). */
const TURN_QUEUES = ["runs", "subagents"] as const satisfies readonly QueueName[];
type TurnQueue = (typeof TURN_QUEUES)[number];

export class QueuePauses {
  private readonly paused = new Set<TurnQueue>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly pollMs = PAUSE_POLL_MS,
  ) {}

  /** Read the flags now (so a worker started on a paused queue holds from its first pop), then every pollMs. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer ??= setInterval(() => void this.refresh(), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Whether turns of `queue` are on hold, as last read (a queue that runs no turns never is). */
  isPaused(queue: string): boolean {
    return this.paused.has(queue as TurnQueue);
  }

  /** `queue`'s flag for a drain: the copy, and a read now to confirm it. */
  holdOf(queue: string): HoldCheck {
    return {
      cached: () => this.isPaused(queue),
      confirm: async () => {
        await this.refresh();
        return this.isPaused(queue);
      },
    };
  }

  /** One read of every flag (one at a time: a slow read is not overtaken by the next tick's). */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<void> {
    const flags = await Promise.all(
      TURN_QUEUES.map((q) => this.redis.hget(this.keys.queueMeta(q), "paused").catch(() => undefined)),
    );
    flags.forEach((flag, i) => {
      if (flag === undefined) return; // not read: keep what was known
      const q = TURN_QUEUES[i]!;
      if (flag === null) this.paused.delete(q);
      else this.paused.add(q);
    });
  }
}
