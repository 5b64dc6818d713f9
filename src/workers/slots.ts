/**
 * The ready-list consumer's drain slots (`workers.concurrency`): a slot is taken before a
 * session is popped, so a popped session always runs at once.
 */
export class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];

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

  /** Take a slot if one is free now. */
  tryAcquire(): boolean {
    if (this.used >= this.size || this.waiting.length > 0) return false;
    this.used++;
    return true;
  }

  /** Give a slot back: straight to the first waiter, if any. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}
