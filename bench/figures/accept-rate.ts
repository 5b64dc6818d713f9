/**
 * (4) Accept rate over HTTP: fire-and-forget `agent` RPCs answered per second by a gateway
 * (no workers in the process: only the accept path is measured); against a bare fastify route
 * doing one `queue.add` (no worker). Same HTTP client, same requests in flight.
 */
import { CpuRows } from "../harness/cpu.js";
import { alternatingRounds, units, type BenchContext, type Figure } from "../harness/context.js";
import { runPool } from "../harness/http.js";
import { agentRpcs, startHttpPair } from "../harness/http-pair.js";
import type { FigureResult, Row } from "../harness/report.js";
import { perSecond } from "../harness/stats.js";

const IN_FLIGHT = 32;

export const acceptRate: Figure = {
  id: "4",
  title: "Fire-and-forget accept rate over HTTP",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const n = units(ctx, 2000, 400);
    const sessions = units(ctx, 100, 30);
    const row: Row = {
      label: "`agent` RPCs accepted/s",
      unit: "req/s",
      baselineLabel: "fastify route + one queue.add: req/s",
      measured: [],
      baseline: [],
      target: { on: "ratio", op: ">=", value: 1.0 },
    };

    const cpu = new CpuRows(ctx.admin, "accepted request", "bare request");
    // No workers on either side: only the accept path runs.
    const pair = await startHttpPair(ctx, { concurrency: 0, inFlight: IN_FLIGHT });
    try {
      const sbRound = async (count: number) => {
        const t0 = Date.now();
        await agentRpcs(pair.sb, count, IN_FLIGHT, sessions);
        return perSecond(count, Date.now() - t0);
      };
      const bareRound = async (count: number) => {
        const t0 = Date.now();
        await runPool(count, IN_FLIGHT, async (i) => {
          const r = await pair.bc.post("/add", { sessionKey: `bench-${i % sessions}`, message: `m${i}` });
          if (r.status !== 200) throw new Error(`bare route: HTTP ${r.status}`);
        });
        return perSecond(count, Date.now() - t0);
      };
      await alternatingRounds(ctx, row, n, sbRound, bareRound, cpu);
    } finally {
      await pair.close();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `${n} \`agent\` RPCs per round over ${sessions} existing sessions, ` +
        `${IN_FLIGHT} in flight on keep-alive connections, against a gateway-only process (no workers, ` +
        `so nothing but the accept path runs); the figure is requests answered per second. Baseline: ` +
        `the same requests against a fastify route doing one \`queue.add\`, no worker.`,
      rows: [row, ...cpu.rows],
      notes: [],
    };
  },
};
