/**
 * (6) Scaling out: the throughput of short I/O-bound turns (script runtime, `delayMs: 50`)
 * with two `switchboard worker` OS processes against one. There are four times as many
 * sessions as worker slots, so the pipeline, not the sessions, decides. The baseline is the
 * one-process throughput of the same round set; the ideal ratio for this shape is 2x.
 *
 * Both processes are started once: first only one (its rounds), then the second joins (the
 * two-process rounds). Throughput is taken in the steady part of each round: turns finished
 * between the 10th and 90th percentile finish times, so neither the burst of enqueues at
 * the start nor the last sessions finishing alone decide it.
 */
import { eachRound, units, type BenchContext, type Figure } from "../harness/context.js";
import { spawnSwitchboardWorker, writeConfigFile, type ChildWorker } from "../harness/processes.js";
import type { FigureResult, Row } from "../harness/report.js";
import { steadyRate } from "../harness/stats.js";
import {
  benchDeployment,
  createSessions,
  enqueueUserTurn,
  RunDoneWatcher,
  startSwitchboard,
} from "../harness/switchboard.js";

const DELAY_MS = 50;

export const workerScaling: Figure = {
  id: "6",
  title: "1 → 2 worker processes, short I/O-bound turns",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const perProcess = units(ctx, 16, 4);
    const sessions = 4 * 2 * perProcess;
    const turnsPerSession = units(ctx, 6, 2);
    const n = sessions * turnsPerSession;
    const row: Row = {
      label: "throughput with 2 worker processes / with 1",
      unit: "turns/s",
      baselineLabel: "1 worker process: turns/s",
      measured: [],
      baseline: [],
      target: { on: "ratio", op: ">=", value: 1.8 },
    };

    const dep = benchDeployment(
      ctx.redisUrl,
      {
        agents: { defaults: { runtime: { kind: "script", rules: [{ delayMs: DELAY_MS, reply: "done: {{text}}" }] } } },
      },
      { concurrency: perProcess },
    );
    const configFile = writeConfigFile(dep.config);
    // The bench process only enqueues: no workers, no gateway.
    const sys = await startSwitchboard(dep.config, { gateway: false, workers: false });
    const watcher = await RunDoneWatcher.start(dep.config);
    const procs: ChildWorker[] = [];
    try {
      const ss = await createSessions(
        sys.svc,
        "main",
        Array.from({ length: sessions }, (_, i) => `io-${i}`),
      );
      const round = async (count: number) => {
        watcher.reset();
        // Session-major order: every session gets its first turn before any gets a second.
        await Promise.all(
          Array.from({ length: count }, (_, i) => enqueueUserTurn(sys.svc, ss[i % sessions]!, `m${i}`)),
        );
        await watcher.waitFor(count, 300_000, "turns");
        return steadyRate(watcher.times());
      };
      procs.push(await spawnSwitchboardWorker(configFile.file));
      await round(sessions); // warm-up
      const one: number[] = [];
      for (let i = 0; i < ctx.rounds; i++) one.push(await round(n));
      procs.push(await spawnSwitchboardWorker(configFile.file));
      await round(sessions); // warm-up of the second process
      await eachRound(ctx, [row], async (i) => {
        row.baseline.push(one[i]!);
        row.measured.push(await round(n));
      });
    } finally {
      await Promise.all(procs.map((p) => p.stop()));
      watcher.close();
      await sys.close();
      configFile.cleanup();
      dep.cleanup();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `\`switchboard worker\` processes (from dist/, concurrency ${perProcess} each), ` +
        `script runtime answering after \`delayMs: ${DELAY_MS}\`; ${n} turns per round over ${sessions} ` +
        `sessions (4x the ${2 * perProcess} slots of two processes), enqueued at once by the bench process. ` +
        `Rounds with one process first, then the second process joins for the two-process rounds; ` +
        `round i of each is paired. Throughput is the steady part of a round (finishes between the 10th and ` +
        `90th percentile finish times). Ideal for this shape: 2x.`,
      rows: [row],
      notes: [],
    };
  },
};
