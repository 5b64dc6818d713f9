/**
 * CPU spent per unit of work, on each side of a throughput figure: this process (everything the
 * figure runs in it: Switchboard or bare BullMQ, and the HTTP client or run-done watcher where
 * the figure has one) and the Redis server (INFO cpu, all of its threads). Wall-clock rates on a
 * shared 2-core machine swing by ±20% from run to run; CPU per unit swings much less, and it
 * says where the time goes when a rate misses its target.
 */
import type { Redis } from "ioredis";
import type { Row } from "./report.js";

/** Redis's own CPU so far (user + system, all threads), in µs. */
async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info("cpu");
  const sec = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? Number.NaN);
  return (sec("used_cpu_user") + sec("used_cpu_sys")) * 1e6;
}

function processCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/**
 * Two information rows (no targets) filled by wrapping a figure's round functions: CPU µs per
 * unit in this process and in Redis, measured side against baseline side, round by round.
 */
export class CpuRows {
  readonly process: Row;
  readonly redis: Row;

  constructor(
    private readonly admin: Redis,
    what: string,
    baselineWhat: string,
  ) {
    const row = (where: string): Row => ({
      label: `${where} CPU per ${what}`,
      unit: "µs",
      baselineLabel: `${where} CPU per ${baselineWhat}`,
      measured: [],
      baseline: [],
    });
    this.process = row("process");
    this.redis = row("Redis");
  }

  get rows(): Row[] {
    return [this.process, this.redis];
  }

  /**
   * `fn` (a round of `count` units returning its rate), also recording its CPU per unit on
   * `side`. Wrap only the measured rounds, not warm-ups, so the rows' rounds line up.
   */
  wrap(side: "measured" | "baseline", fn: (count: number) => Promise<number>): (count: number) => Promise<number> {
    return async (count) => {
      const [p0, r0] = [processCpuUs(), await redisCpuUs(this.admin)];
      const rate = await fn(count);
      const [p1, r1] = [processCpuUs(), await redisCpuUs(this.admin)];
      this.process[side].push((p1 - p0) / count);
      this.redis[side].push((r1 - r0) / count);
      return rate;
    };
  }
}
