/**
 * (8) Chat turns end to end: `/v1/inbound` messages (the door chat channels use) into group
 * sessions, each turn's reply delivered (a `log` channel: recorded as delivered, no network),
 * gateway and workers in one process, until every run finished and every delivery job
 * completed. Information only: the issue sets no target for it. It measures what figures 1-4
 * leave out (the inbound door's session bookkeeping, a delivery job and record per reply), so a
 * cost there shows up. Baseline as figure 2: a fastify route doing one `queue.add`, a bare
 * Worker.
 */
import { bareRouteRound } from "../harness/bare.js";
import { CpuRows } from "../harness/cpu.js";
import { alternatingRounds, units, type BenchContext, type Figure } from "../harness/context.js";
import { runPool } from "../harness/http.js";
import { startHttpPair } from "../harness/http-pair.js";
import type { FigureResult, Row } from "../harness/report.js";
import { perSecond } from "../harness/stats.js";

const CONCURRENCY = 16;
const IN_FLIGHT = 32;
/** Senders per group: a group's messages come from several people, as in a chat. */
const SENDERS = 7;

export const inboundTurns: Figure = {
  id: "8",
  title: "Chat turns end to end (inbound, reply delivered)",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const n = units(ctx, 2000, 300);
    const groups = units(ctx, 100, 30);
    const row = (label: string): Row => ({
      label,
      unit: "turns/s",
      baselineLabel: "fastify route + queue.add, bare Worker: jobs/s",
      measured: [],
      baseline: [],
    });
    const groupRow = row("inbound turns/s with their replies delivered");
    const groupCpu = new CpuRows(ctx.admin, "inbound turn", "bare request");
    const dmRow = row("inbound DM turns/s with their replies delivered");
    const dmCpu = new CpuRows(ctx.admin, "inbound DM turn", "bare request");
    const pair = await startHttpPair(ctx, {
      concurrency: CONCURRENCY,
      inFlight: IN_FLIGHT,
      // A session per DM (the default "main" puts every DM in one session).
      config: { channels: { telegram: { kind: "log" } }, session: { dmScope: "per-channel-peer" } },
    });
    const { sb, bare, bc } = pair;
    const watcher = pair.watcher!;
    const deliveries = pair.sys.svc.queues.delivery;
    try {
      /** `count` messages (`body(i)`), until their turns finished and their replies were delivered. */
      const sbRound = (body: (i: number) => Record<string, unknown>) => async (count: number) => {
        watcher.reset();
        const t0 = Date.now();
        await runPool(count, IN_FLIGHT, async (i) => {
          const r = await sb.post("/v1/inbound", { channel: "telegram", ...body(i) });
          if (r.status !== 202 && r.status !== 200) throw new Error(`inbound: HTTP ${r.status}`);
        });
        await watcher.waitFor(count, 300_000, "turns");
        // The replies' delivery jobs, added by the turns' finishes, all done.
        for (;;) {
          const c = await deliveries.getJobCounts("waiting", "active", "delayed", "prioritized");
          if (Object.values(c).every((v) => v === 0)) break;
          await new Promise((r) => setTimeout(r, 10));
        }
        return perSecond(count, Date.now() - t0);
      };
      const group = (i: number) => ({
        chatType: "group",
        groupId: `g${i % groups}`,
        from: `u${i % SENDERS}`,
        text: `m${i}`,
      });
      // A DM is one person's: every message of one from the same sender, the same route.
      const dm = (i: number) => ({ chatType: "dm", from: `d${i % groups}`, text: `m${i}` });
      const bareRound = (count: number) =>
        bareRouteRound(bare, bc, count, IN_FLIGHT, (i) => ({
          groupId: `g${i % groups}`,
          from: `u${i % SENDERS}`,
          text: `m${i}`,
        }));
      await alternatingRounds(ctx, groupRow, n, sbRound(group), bareRound, groupCpu);
      await alternatingRounds(ctx, dmRow, n, sbRound(dm), bareRound, dmCpu);
    } finally {
      await pair.close();
    }
    return {
      id: this.id,
      title: this.title,
      setup:
        `${n} \`/v1/inbound\` group messages over ${groups} groups (${SENDERS} senders each), and ` +
        `${n} DM messages over ${groups} DMs (one sender each), ` +
        `${IN_FLIGHT} requests in flight on keep-alive connections, gateway and workers (concurrency ` +
        `${CONCURRENCY}, echo runtime) in one process, each reply delivered through a \`log\` channel, until ` +
        `every run-done notification arrived and the delivery queue was empty. Baseline as figure 2: a ` +
        `fastify route doing one \`queue.add\` and a bare Worker, until every job completed.`,
      rows: [groupRow, ...groupCpu.rows, dmRow, ...dmCpu.rows],
      notes: [],
    };
  },
};
