/**
 * (7) Memory of a worker facing a backlog: 10k turns are queued before a `switchboard worker`
 * process starts; its resident memory is sampled while it drains them, and the peak is the
 * figure. Baseline: a bare BullMQ worker process (no-op, same concurrency) draining 10k
 * queued jobs. The target is absolute: ≤ 200 MB.
 */
import { BareBullmq } from "../harness/bare.js";
import { eachRound, units, type BenchContext, type Figure } from "../harness/context.js";
import { runPool } from "../harness/http.js";
import { RssSampler, spawnBareWorker, spawnSwitchboardWorker, writeConfigFile } from "../harness/processes.js";
import type { FigureResult, Row } from "../harness/report.js";
import {
  benchDeployment,
  createSessions,
  enqueueUserTurn,
  RunDoneWatcher,
  startSwitchboard,
} from "../harness/switchboard.js";
import { setTimeout as sleep } from "node:timers/promises";

const CONCURRENCY = 16;

async function switchboardPeak(
  ctx: BenchContext,
  queued: number,
  sessions: number,
): Promise<{ peak: number; drainMs: number }> {
  const dep = benchDeployment(ctx.redisUrl, {}, { concurrency: CONCURRENCY });
  const sys = await startSwitchboard(dep.config, { gateway: false, workers: false });
  const watcher = await RunDoneWatcher.start(dep.config);
  try {
    const ss = await createSessions(
      sys.svc,
      "main",
      Array.from({ length: sessions }, (_, i) => `backlog-${i}`),
    );
    await runPool(queued, 256, async (i) => {
      await enqueueUserTurn(sys.svc, ss[i % sessions]!, `m${i}`);
    });
    const configFile = writeConfigFile(dep.config);
    try {
      const worker = await spawnSwitchboardWorker(configFile.file);
      const sampler = new RssSampler(worker.pid);
      try {
        await watcher.waitFor(queued, 600_000, "queued turns");
        return { peak: sampler.stop(), drainMs: Date.now() - worker.readyAt };
      } finally {
        sampler.stop();
        await worker.stop();
      }
    } finally {
      configFile.cleanup();
    }
  } finally {
    watcher.close();
    await sys.close();
    dep.cleanup();
  }
}

async function barePeak(ctx: BenchContext, queued: number): Promise<number> {
  const bare = new BareBullmq(ctx.redisUrl);
  try {
    for (let i = 0; i < queued; i += 1000) {
      await bare.queue.addBulk(
        Array.from({ length: Math.min(1000, queued - i) }, (_, j) => ({ name: "job", data: { text: `m${i + j}` } })),
      );
    }
    const worker = await spawnBareWorker(ctx.redisUrl, bare.name, CONCURRENCY);
    const sampler = new RssSampler(worker.pid);
    try {
      const deadline = Date.now() + 300_000;
      while ((await bare.queue.getCompletedCount()) < queued) {
        if (Date.now() > deadline) throw new Error("bare worker did not drain its backlog in time");
        await sleep(100);
      }
      return sampler.stop();
    } finally {
      sampler.stop();
      await worker.stop();
    }
  } finally {
    await bare.queue.obliterate({ force: true }).catch(() => {});
    await bare.close();
  }
}

export const workerRss: Figure = {
  id: "7",
  title: "Worker memory with a backlog of queued turns",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const queued = units(ctx, 10_000, 500);
    const sessions = units(ctx, 100, 50);
    const row: Row = {
      label: `worker peak RSS draining ${queued.toLocaleString("en-US")} queued turns`,
      unit: "MB",
      baselineLabel: `bare BullMQ worker process draining ${queued.toLocaleString("en-US")} queued jobs: peak RSS`,
      measured: [],
      baseline: [],
      target: { on: "measured", op: "<=", value: 200 },
    };
    const drains: number[] = [];
    await eachRound(ctx, [row], async () => {
      // Both sides of a round at once (each its own process, backlog and keys): peak memory does
      // not depend on sharing the cores, and it halves the figure's time (--quick must stay under 20 s).
      const [sb, bare] = await Promise.all([switchboardPeak(ctx, queued, sessions), barePeak(ctx, queued)]);
      row.measured.push(sb.peak);
      drains.push(sb.drainMs);
      row.baseline.push(bare);
    });
    return {
      id: this.id,
      title: this.title,
      setup:
        `${queued} echo turns over ${sessions} sessions queued (\`enqueueTurn\`) ` +
        `before a \`switchboard worker\` process (concurrency ${CONCURRENCY}) starts; ` +
        `its VmRSS is read from /proc every 50 ms (reported in MB of 10^6 bytes) until every turn finished, ` +
        `the peak is the figure (a fresh deployment and process per round, run alongside the baseline's). Baseline: ` +
        `${queued} jobs queued (addBulk) before a bare BullMQ worker process (no-op, ` +
        `concurrency ${CONCURRENCY}) starts, sampled the same way until all completed.` +
        `${ctx.quick ? " Quick run: a twentieth of the backlog." : ""}`,
      rows: [row],
      notes: [
        `drain time of the backlog by the switchboard worker, per round: ` +
          `${drains.map((d) => `${(d / 1000).toFixed(1)} s`).join(", ")}.`,
      ],
    };
  },
};
