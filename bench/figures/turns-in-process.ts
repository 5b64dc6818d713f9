/**
 * (1) Turns end to end in this process: `enqueueTurn` (inbox + drain wake-up) and the worker
 * host running them (lease, run records, transcript, echo runtime) over many sessions, until
 * every run-done notification arrived; against bare BullMQ add + no-op process with the same
 * worker concurrency on the same Redis. Both sides are warmed (one unmeasured round each) and
 * alternate which goes first from round to round. A second row runs with
 * `storage.fsync: "always"` when this build knows that setting.
 */
import { BareBullmq } from "../harness/bare.js";
import { CpuRows } from "../harness/cpu.js";
import { alternatingRounds, units, type BenchContext, type Figure } from "../harness/context.js";
import type { FigureResult, Row } from "../harness/report.js";
import { perSecond } from "../harness/stats.js";
import {
  benchDeployment,
  createSessions,
  enqueueUserTurn,
  fsyncAlwaysSupport,
  RunDoneWatcher,
  startSwitchboard,
} from "../harness/switchboard.js";

const CONCURRENCY = 16;

async function bareRound(bare: BareBullmq, n: number, sessions: number): Promise<number> {
  bare.resetCompleted();
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: n }, (_, i) => bare.queue.add("job", { text: `m${i}`, session: `s${i % sessions}` })),
  );
  await bare.waitForCompleted(n, 120_000);
  return perSecond(n, Date.now() - t0);
}

async function switchboardRows(
  ctx: BenchContext,
  label: string,
  fsync: "always" | undefined,
  n: number,
  sessions: number,
  bare: BareBullmq,
): Promise<Row[]> {
  const row: Row = {
    label,
    unit: "turns/s",
    baselineLabel: "bare BullMQ add+process jobs/s",
    measured: [],
    baseline: [],
    target: { on: "ratio", op: ">=", value: fsync ? 0.45 : 0.8 },
  };
  const cpu = new CpuRows(ctx.admin, fsync ? `turn (fsync "always")` : "turn", "bare job");
  const dep = benchDeployment(ctx.redisUrl, {}, { concurrency: CONCURRENCY, ...(fsync ? { fsync } : {}) });
  const sys = await startSwitchboard(dep.config, { gateway: false, workers: true });
  const watcher = await RunDoneWatcher.start(dep.config);
  try {
    const ss = await createSessions(
      sys.svc,
      "main",
      Array.from({ length: sessions }, (_, i) => `bench-${i}`),
    );
    const sbRound = async (count: number) => {
      watcher.reset();
      const t0 = Date.now();
      await Promise.all(Array.from({ length: count }, (_, i) => enqueueUserTurn(sys.svc, ss[i % sessions]!, `m${i}`)));
      await watcher.waitFor(count, 300_000, "turns");
      return perSecond(count, Date.now() - t0);
    };
    await alternatingRounds(ctx, row, n, sbRound, (count) => bareRound(bare, count, sessions), cpu);
  } finally {
    watcher.close();
    await sys.close();
    dep.cleanup();
  }
  return [row, ...cpu.rows];
}

export const turnsInProcess: Figure = {
  id: "1",
  title: "Turns end to end, in-process",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const n = units(ctx, 3000, 300);
    const sessions = units(ctx, 100, 30);
    const bare = new BareBullmq(ctx.redisUrl);
    await bare.startWorker(CONCURRENCY);
    const rows: Row[] = [];
    try {
      ctx.log("  default durability");
      rows.push(
        ...(await switchboardRows(ctx, "turns/s in-process, default durability", undefined, n, sessions, bare)),
      );
      const fsync = fsyncAlwaysSupport();
      if (fsync.ok) {
        ctx.log('  storage.fsync: "always"');
        rows.push(
          ...(await switchboardRows(ctx, 'turns/s in-process, storage.fsync "always"', "always", n, sessions, bare)),
        );
      } else {
        ctx.log(`  note: fsync "always" row skipped: ${fsync.why}`);
        rows.push({
          label: 'turns/s in-process, storage.fsync "always"',
          unit: "turns/s",
          baselineLabel: "bare BullMQ add+process jobs/s",
          measured: [],
          baseline: [],
          target: { on: "ratio", op: ">=", value: 0.45 },
          skipped: fsync.why,
        });
      }
    } finally {
      await bare.close();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `${n} turns over ${sessions} sessions (echo runtime), all enqueued at once with \`enqueueTurn\`, ` +
        `worker host concurrency ${CONCURRENCY}, until every run-done notification arrived. Baseline: ` +
        `${n} bare BullMQ jobs added at once, a Worker with concurrency ${CONCURRENCY} and a no-op processor, ` +
        `until every job completed. Same process, same Redis, both warmed; ` +
        `the side that goes first alternates by round.`,
      rows,
      notes: [],
    };
  },
};
