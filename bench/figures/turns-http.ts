/**
 * (2) Turns end to end over HTTP: fire-and-forget `agent` RPCs against a started gateway with
 * workers in the same process (startSystem, as `switchboard start` runs), until every run is
 * finished; against a bare fastify route doing one `queue.add` per request plus a bare
 * Worker (no-op, same concurrency), until every job is processed. One keep-alive HTTP client
 * with the same number of requests in flight serves both sides.
 */
import { bareRouteRound } from "../harness/bare.js";
import { CpuRows } from "../harness/cpu.js";
import { alternatingRounds, units, type BenchContext, type Figure } from "../harness/context.js";
import { agentRpcs, startHttpPair } from "../harness/http-pair.js";
import type { FigureResult, Row } from "../harness/report.js";
import { perSecond } from "../harness/stats.js";

const CONCURRENCY = 16;
const IN_FLIGHT = 32;

export const turnsHttp: Figure = {
  id: "2",
  title: "Turns end to end over HTTP",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const n = units(ctx, 2000, 300);
    const sessions = units(ctx, 100, 30);
    const row: Row = {
      label: "turns/s over HTTP (`agent` RPC), default durability",
      unit: "turns/s",
      baselineLabel: "fastify route + queue.add, bare Worker: jobs/s",
      measured: [],
      baseline: [],
      target: { on: "ratio", op: ">=", value: 0.8 },
    };

    const cpu = new CpuRows(ctx.admin, "turn", "bare request");
    const pair = await startHttpPair(ctx, { concurrency: CONCURRENCY, inFlight: IN_FLIGHT });
    const watcher = pair.watcher!;
    try {
      const sbRound = async (count: number) => {
        watcher.reset();
        const t0 = Date.now();
        await agentRpcs(pair.sb, count, IN_FLIGHT, sessions);
        await watcher.waitFor(count, 300_000, "turns");
        return perSecond(count, Date.now() - t0);
      };
      const bareRound = (count: number) =>
        bareRouteRound(pair.bare, pair.bc, count, IN_FLIGHT, (i) => ({
          sessionKey: `bench-${i % sessions}`,
          message: `m${i}`,
        }));
      await alternatingRounds(ctx, row, n, sbRound, bareRound, cpu);
    } finally {
      await pair.close();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `${n} \`agent\` RPCs (fire-and-forget) over ${sessions} existing sessions, ` +
        `${IN_FLIGHT} requests in flight on keep-alive connections, gateway and workers (concurrency ` +
        `${CONCURRENCY}, echo runtime) in one process, until every run-done notification arrived. Baseline: ` +
        `the same ${n} requests against a fastify route doing one \`queue.add\`, ` +
        `a bare Worker (concurrency ${CONCURRENCY}, no-op) in the same process, until every job completed. ` +
        `The HTTP client runs in the same process for both sides.`,
      rows: [row, ...cpu.rows],
      notes: [],
    };
  },
};
