/** What every figure gets from the runner, and the shape of a figure module. */
import type { Redis } from "ioredis";
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
 * first so that a machine warming up or slowing down does not favour one of them. `alsoPrint`:
 * rows the round functions fill on the side (e.g. CpuRows), printed with each round.
 */
export async function alternatingRounds(
  ctx: BenchContext,
  row: Row,
  n: number,
  measured: (n: number) => Promise<number>,
  baseline: (n: number) => Promise<number>,
  alsoPrint: Row[] = [],
): Promise<void> {
  await eachRound(ctx, [row, ...alsoPrint], async (i) => {
    if (i % 2 === 0) {
      row.baseline.push(await baseline(n));
      row.measured.push(await measured(n));
    } else {
      row.measured.push(await measured(n));
      row.baseline.push(await baseline(n));
    }
  });
}
