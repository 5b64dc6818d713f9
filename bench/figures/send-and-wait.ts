/**
 * (3) Send-and-wait latency, one at a time: `agent` then `agent.wait` over HTTP against a
 * started gateway with workers; against bare `queue.add` → `job.waitUntilFinished`
 * (QueueEvents) in-process with a bare Worker. Median (p50) of each round's samples.
 */
import { BareBullmq } from "../harness/bare.js";
import { alternatingRounds, units, type BenchContext, type Figure } from "../harness/context.js";
import { JsonClient } from "../harness/http.js";
import type { FigureResult, Row } from "../harness/report.js";
import { percentile } from "../harness/stats.js";
import { benchDeployment, startSwitchboard } from "../harness/switchboard.js";

const CONCURRENCY = 16;

export const sendAndWait: Figure = {
  id: "3",
  title: "Send-and-wait latency (p50)",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const samples = units(ctx, 200, 40);
    const row: Row = {
      label: "`agent` + `agent.wait` p50, one at a time",
      unit: "ms",
      baselineLabel: "bare queue.add → job.waitUntilFinished p50",
      measured: [],
      baseline: [],
      target: { on: "ratio", op: "<=", value: 2 },
    };

    const dep = benchDeployment(ctx.redisUrl, {}, { concurrency: CONCURRENCY });
    const sys = await startSwitchboard(dep.config, { gateway: true, workers: true });
    const sb = new JsonClient(sys.url!, 1);
    const bare = new BareBullmq(ctx.redisUrl);
    await bare.startWorker(CONCURRENCY);
    const events = await bare.queueEvents();
    try {
      const sbRound = async (count: number) => {
        const lat: number[] = [];
        for (let i = 0; i < count; i++) {
          const t0 = performance.now();
          const { runId } = await sb.rpc("agent", { sessionKey: "bench-wait", message: `m${i}` });
          const w = await sb.rpc("agent.wait", { runId, timeoutMs: 30_000 });
          if (w.status !== "ok") throw new Error(`agent.wait: ${JSON.stringify(w)}`);
          lat.push(performance.now() - t0);
        }
        return percentile(lat, 50);
      };
      const bareRound = async (count: number) => {
        const lat: number[] = [];
        for (let i = 0; i < count; i++) {
          const t0 = performance.now();
          const job = await bare.queue.add("job", { sessionKey: "bench-wait", message: `m${i}` });
          await job.waitUntilFinished(events, 30_000);
          lat.push(performance.now() - t0);
        }
        return percentile(lat, 50);
      };
      await bareRound(10);
      await alternatingRounds(ctx, row, samples, sbRound, bareRound);
    } finally {
      sb.close();
      await bare.close();
      await sys.close();
      dep.cleanup();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `${samples} sequential sends per round into one session: \`agent\` RPC, ` +
        `then \`agent.wait\` RPC until the run is finished (HTTP, keep-alive), ` +
        `gateway and workers (echo runtime) in one process; the figure is the p50 of the round. Baseline: ` +
        `${samples} sequential \`queue.add\` → \`job.waitUntilFinished\` (QueueEvents) with a bare Worker, ` +
        `in-process.`,
      rows: [row],
      notes: [],
    };
  },
};
