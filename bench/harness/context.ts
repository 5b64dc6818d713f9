/** What every figure gets from the runner, and the shape of a figure module. */
import type { Redis } from "ioredis";
import type { CpuRows } from "./cpu.js";
import { formatRound, type FigureResult, type Row } from "./report.js";

export interface BenchContext {
  redisUrl: string;
  /** The bench's own client (snapshots, probes); excluded from round-trip counts. */
  admin: Redis;
  quick: boolean;
  rounds: number;
  /** Progress on stderr. */
  log(line: string): void;
}

export interface Figure {
  id: string;
  title: string;
  run(ctx: BenchContext): Promise<FigureResult>;
}

/** Run `fn` for each round, then print each row's numbers of that round. */
export async function eachRound(ctx: BenchContext, rows: Row[], fn: (round: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < ctx.rounds; i++) {
    await fn(i);
    for (const row of rows)
      if (row.measured[i] !== undefined) ctx.log(`    round ${i + 1}  ${row.label}: ${formatRound(row, i)}`);
  }
}

/** Scale a unit count: the full size, or the quick one. */
export function units(ctx: BenchContext, full: number, quick: number): number {
  return ctx.quick ? quick : full;
}

/**
 * One row's rounds, each measuring both sides with `n` units, alternating which side goes
 * first so that a machine warming up or slowing down does not favour one of them. `cpu`: the
 * CPU per unit of each side's measured rounds, printed with each round.
 *
 * First both sides run one unmeasured round of `n` units each (the same work on each side), so
 * every round compares code that is equally warm: what a long-running process is. A warm-up of
 * a few hundred units leaves the side with more code to optimise (Switchboard's) half-compiled
 * in its first measured round, and with rounds of a fraction of a second that weighs on the median.
 */
export async function alternatingRounds(
  ctx: BenchContext,
  row: Row,
  n: number,
  measuredRound: (n: number) => Promise<number>,
  baselineRound: (n: number) => Promise<number>,
  cpu?: CpuRows,
): Promise<void> {
  await baselineRound(n);
  await measuredRound(n);
  const measured = cpu ? cpu.wrap("measured", measuredRound) : measuredRound;
  const baseline = cpu ? cpu.wrap("baseline", baselineRound) : baselineRound;
  await eachRound(ctx, [row, ...(cpu?.rows ?? [])], async (i) => {
    if (i % 2 === 0) {
      row.baseline.push(await baseline(n));
      row.measured.push(await measured(n));
    } else {
      row.measured.push(await measured(n));
      row.baseline.push(await baseline(n));
    }
  });
}
