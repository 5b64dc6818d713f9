/**
 * At most one log line per key and interval, the lines in between counted: a fault that repeats
 * every second (a transcript directory whose fsync keeps failing, a process out of descriptors)
 * is logged when it starts and then once per interval with how many were left out, not once per
 * occurrence. Pure: the caller passes the clock.
 */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly everyMs: number,
    /** Keys remembered at most (the oldest forgotten first): a key per file must not grow for ever. */
    private readonly maxKeys = 1000,
  ) {}

  /** Whether to log `key` now, and how many of its lines were left out since the last one logged. */
  take(key: string, now: number): { log: boolean; suppressed: number } {
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.everyMs) {
      seen.suppressed++;
      return { log: false, suppressed: seen.suppressed };
    }
    const suppressed = seen?.suppressed ?? 0;
    this.last.delete(key);
    if (this.last.size >= this.maxKeys) this.last.delete(this.last.keys().next().value as string);
    this.last.set(key, { at: now, suppressed: 0 });
    return { log: true, suppressed };
  }
}
