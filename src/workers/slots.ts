/**
 * A worker process's drain slots (`workers.concurrency`), shared by the runs queue's drain jobs
 * and the ready-list consumer so that together they run at most that many sessions at once.
 */
export class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly freed: (() => void)[] = [];

  constructor(readonly size: number) {}

  get free(): number {
    return this.size - this.used;
  }

  /** Take a slot, waiting (first come, first served) while all are in use. */
  async acquire(): Promise<void> {
    if (this.used < this.size && this.waiting.length === 0) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Give a slot back: straight to the first waiter, if any. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else {
      this.used--;
      for (const wake of this.freed.splice(0)) wake();
    }
  }

  /** Resolves once a slot is free, without taking it. */
  async whenFree(): Promise<void> {
    if (this.free > 0 && this.waiting.length === 0) return;
    await new Promise<void>((resolve) => this.freed.push(resolve));
  }
}
