/**
 * Which queues of turns an operator has paused (Bull Board's pause, `Queue.pause()`), as a worker
 * sees it: BullMQ stops handing out a paused queue's jobs by itself, but a drain runs a session's
 * turns one after another inside one job, and a ready-list drain is no job at all. So drains ask
 * here between turns, and the ready-list consumer before it pops (docs/concepts/reliability.md,
 * "Operator actions in Bull Board"). Pausing `runs` holds the sessions woken from the ready list
 * too; `subagents` holds its own drain jobs.
 *
 * Read from BullMQ's own flag (`Queue.isPaused()`: the `paused` field of the queue's meta hash,
 * set and cleared by its pause script) every PAUSE_POLL_MS: two small commands a second per
 * worker, nothing on a turn's path. A pause takes effect within about that long, between two
 * turns: a turn already begun (the finish of the one before began it) still runs. A drain that
 * finds the copy set reads the flag again, with a read of its own, before it stops, so a resume
 * the copy has not seen yet costs no hand-back; a failed read keeps the last answer (Redis away
 * stops the turns anyway).
 */
import type { Queues } from "../queues/queues.js";
import type { HoldCheck } from "./drain.js";

/** How often the flags are read: also about how long a pause or resume takes to be seen. */
export const PAUSE_POLL_MS = 1000;

/** The queues whose jobs run sessions' turns (drain jobs). */
const TURN_QUEUES = ["runs", "subagents"] as const;
type TurnQueue = (typeof TURN_QUEUES)[number];

export class QueuePauses {
  private readonly paused = new Set<TurnQueue>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly queues: Pick<Queues, TurnQueue>,
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
      // A read of its own, not one begun before a resume it would then miss.
      confirm: async () => {
        await this.read();
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
    const flags = await Promise.all(TURN_QUEUES.map((q) => this.queues[q].isPaused().catch(() => undefined)));
    flags.forEach((flag, i) => {
      if (flag === undefined) return; // not read: keep what was known
      const q = TURN_QUEUES[i]!;
      if (flag) this.paused.add(q);
      else this.paused.delete(q);
    });
  }
}
