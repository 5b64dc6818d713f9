/**
 * (5) What a turn costs Redis: client round trips (ioredis instrumented in this process, see
 * harness/round-trips.ts for exactly what is counted) and Redis-side commands (INFO
 * commandstats, commands run inside Lua scripts included), per turn and per `sessions_send`
 * flow with its reply-back and announce. Baseline: one bare BullMQ job (add + process),
 * counted the same way.
 *
 * A window opens before the first enqueue and closes once every expected run finished and
 * Redis has seen no command for a quiet period (so a turn's wind-down — lease release, job
 * completion — is in it). Only the measured system is alive during its window.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { BareBullmq } from "../harness/bare.js";
import { eachRound, units, type BenchContext, type Figure } from "../harness/context.js";
import { commandStats, netInputBytes, statsDelta, topEntries, totalCommands } from "../harness/redis.js";
import type { FigureResult, Row } from "../harness/report.js";
import { roundTrips, type RoundTripCounts } from "../harness/round-trips.js";
import {
  benchDeployment,
  createSessions,
  enqueueUserTurn,
  RunDoneWatcher,
  startSwitchboard,
  type BenchSession,
} from "../harness/switchboard.js";

const CONCURRENCY = 16;

interface WindowCounts {
  client: RoundTripCounts;
  server: Map<string, number>;
  serverTotal: number;
  /** Bytes Redis read from clients in the window (the bench's own INFO polls included: a few per unit). */
  bytesIn: number;
}

/** Until Redis has served no command (INFO aside) for `quietMs`. */
async function quiet(admin: Redis, quietMs: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = totalCommands(await commandStats(admin));
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    if (Date.now() > deadline) throw new Error(`Redis did not go quiet for ${quietMs} ms within ${timeoutMs} ms`);
    await sleep(50);
    const now = totalCommands(await commandStats(admin));
    if (now !== last) {
      last = now;
      since = Date.now();
    }
  }
}

/** Counts from the first command of `work` until Redis went quiet after it (the previous window ended quiet). */
async function countWindow(ctx: BenchContext, quietMs: number, work: () => Promise<void>): Promise<WindowCounts> {
  const before = await commandStats(ctx.admin);
  const bytesBefore = await netInputBytes(ctx.admin);
  let client: RoundTripCounts;
  roundTrips.start();
  try {
    await work();
    await quiet(ctx.admin, quietMs);
  } finally {
    client = roundTrips.stop();
  }
  const server = statsDelta(before, await commandStats(ctx.admin));
  return {
    client,
    server,
    serverTotal: totalCommands(server),
    bytesIn: (await netInputBytes(ctx.admin)) - bytesBefore,
  };
}

function minus(a: WindowCounts, b: WindowCounts): { roundTrips: number; commands: number; server: number } {
  return {
    roundTrips: a.client.roundTrips - b.client.roundTrips,
    commands: a.client.commands - b.client.commands,
    server: a.serverTotal - b.serverTotal,
  };
}

/** The two-agent conversation of examples/two-agents.json5, addressed per pair of sessions. */
const TWO_AGENTS = {
  tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true, allow: ["alice", "bob"] } },
  session: { agentToAgent: { maxPingPongTurns: 2 } },
  channels: { web: { kind: "log" as const } },
  agents: {
    list: [
      {
        id: "alice",
        default: true,
        runtime: {
          kind: "script" as const,
          rules: [
            {
              when: { regex: "^ask (\\S+) (.+)", provenance: "user" as const },
              tools: [{ name: "sessions_send", args: { sessionKey: "{{1}}", message: "{{2}}", timeoutSeconds: 10 } }],
              reply: "Bob says: {{tool.0.reply}}",
            },
            { when: { step: "reply" as const }, reply: "Thanks, Bob, that settles it." },
            { reply: "Alice here." },
          ],
        },
      },
      {
        id: "bob",
        runtime: {
          kind: "script" as const,
          rules: [
            { when: { step: "announce" as const }, reply: "Bob: I answered a question from Alice." },
            { when: { step: "reply" as const }, reply: "REPLY_SKIP" },
            {
              when: { provenance: "inter_session" as const },
              reply: "The plan for '{{text}}': ship on Friday, review on Monday.",
            },
            { reply: "Bob here." },
          ],
        },
      },
    ],
  },
};
/** Runs one flow finishes: alice's asking turn, bob's answer, alice's and bob's reply-back turns, bob's announce. */
const RUNS_PER_FLOW = 5;

export const roundTripsFigure: Figure = {
  id: "5",
  title: "Round trips and Redis commands per turn and per sessions_send flow",
  async run(ctx: BenchContext): Promise<FigureResult> {
    const n = units(ctx, 400, 100);
    const sessions = units(ctx, 50, 20);
    // At most half the worker slots: an asking turn holds its slot while it waits for the
    // answer, so more flows than that would wait on each other until sessions_send times out.
    const flows = units(ctx, CONCURRENCY / 2, 6);
    const quietMs = units(ctx, 600, 200);
    const bareRt = "bare BullMQ job (add + process), client round trips";
    const bareCmd = "bare BullMQ job (add + process), Redis commands";
    const turnRt: Row = {
      label: "client round trips per turn",
      unit: "round trips",
      baselineLabel: bareRt,
      measured: [],
      baseline: [],
      target: { on: "measured", op: "<=", value: 5 },
    };
    const turnCmd: Row = {
      label: "Redis commands per turn (incl. inside Lua)",
      unit: "commands",
      baselineLabel: bareCmd,
      measured: [],
      baseline: [],
    };
    const turnBytes: Row = {
      label: "bytes sent to Redis per turn",
      unit: "bytes",
      baselineLabel: "bare BullMQ job (add + process), bytes sent to Redis",
      measured: [],
      baseline: [],
    };
    const flowRt: Row = {
      label: "client round trips per sessions_send flow (reply-back + announce)",
      unit: "round trips",
      baselineLabel: bareRt,
      measured: [],
      baseline: [],
      target: { on: "measured", op: "<=", value: 20 },
    };
    const flowCmd: Row = {
      label: "Redis commands per sessions_send flow",
      unit: "commands",
      baselineLabel: bareCmd,
      measured: [],
      baseline: [],
    };
    const notes: string[] = [];

    // Baseline first, alone: N bare jobs added at once, a Worker with the same concurrency.
    const bareRounds: { rt: number; cmd: number; bytes: number }[] = [];
    const bare = new BareBullmq(ctx.redisUrl);
    await bare.startWorker(CONCURRENCY);
    try {
      const bareWindow = async (count: number) => {
        bare.resetCompleted();
        return await countWindow(ctx, quietMs, async () => {
          await Promise.all(
            Array.from({ length: count }, (_, i) =>
              bare.queue.add("job", { text: `m${i}`, session: `s${i % sessions}` }),
            ),
          );
          await bare.waitForCompleted(count, 120_000);
        });
      };
      await bareWindow(50); // warm-up: scripts loaded
      for (let i = 0; i < ctx.rounds; i++) {
        const w = await bareWindow(n);
        bareRounds.push({ rt: w.client.roundTrips / n, cmd: w.serverTotal / n, bytes: w.bytesIn / n });
        if (i === 0)
          notes.push(
            `bare job, client commands per job: ${topEntries(w.client.byName, n)}; Redis commands per job: ` +
              `${topEntries(w.server, n, 12)}.`,
          );
      }
    } finally {
      await bare.close();
    }

    // Turns: N echo turns over S sessions through enqueueTurn and the worker host.
    {
      const dep = benchDeployment(ctx.redisUrl, {}, { concurrency: CONCURRENCY });
      const sys = await startSwitchboard(dep.config, { gateway: false, workers: true });
      const watcher = await RunDoneWatcher.start(dep.config);
      try {
        const ss = await createSessions(
          sys.svc,
          "main",
          Array.from({ length: sessions }, (_, i) => `bench-${i}`),
        );
        const turnsWindow = async (count: number) => {
          watcher.reset();
          return await countWindow(ctx, quietMs, async () => {
            await Promise.all(
              Array.from({ length: count }, (_, i) => enqueueUserTurn(sys.svc, ss[i % sessions]!, `m${i}`)),
            );
            await watcher.waitFor(count, 300_000, "turns");
          });
        };
        await turnsWindow(sessions); // warm-up
        await eachRound(ctx, [turnRt, turnCmd, turnBytes], async (i) => {
          const w = await turnsWindow(n);
          turnRt.measured.push(w.client.roundTrips / n);
          turnRt.baseline.push(bareRounds[i]!.rt);
          turnCmd.measured.push(w.serverTotal / n);
          turnCmd.baseline.push(bareRounds[i]!.cmd);
          turnBytes.measured.push(w.bytesIn / n);
          turnBytes.baseline.push(bareRounds[i]!.bytes);
          if (i === 0) {
            notes.push(
              `turn, client commands per turn (${(w.client.commands / n).toFixed(1)} commands in ` +
                `${(w.client.roundTrips / n).toFixed(1)} round trips): ${topEntries(w.client.byName, n, 14)}.`,
            );
            notes.push(`turn, Redis commands per turn: ${topEntries(w.server, n, 14)}.`);
          }
        });
      } finally {
        watcher.close();
        await sys.close();
        dep.cleanup();
      }
    }

    // sessions_send flows: alice asks bob (script runtimes); the flow's cost is the chain's
    // total minus a plain alice turn measured in the same round (the asking turn itself).
    {
      const dep = benchDeployment(ctx.redisUrl, TWO_AGENTS, { concurrency: CONCURRENCY });
      const sys = await startSwitchboard(dep.config, { gateway: false, workers: true });
      const watcher = await RunDoneWatcher.start(dep.config);
      try {
        const names = Array.from({ length: flows }, (_, i) => `flow-${i}`);
        const alices: BenchSession[] = await createSessions(sys.svc, "alice", names);
        const bobs: BenchSession[] = await createSessions(sys.svc, "bob", names);
        const plainWindow = async () => {
          watcher.reset();
          return await countWindow(ctx, quietMs, async () => {
            await Promise.all(alices.map((a) => enqueueUserTurn(sys.svc, a, "hello")));
            await watcher.waitFor(flows, 60_000, "plain turns");
          });
        };
        const flowWindow = async () => {
          watcher.reset();
          return await countWindow(ctx, quietMs, async () => {
            await Promise.all(
              alices.map((a, i) => enqueueUserTurn(sys.svc, a, `ask ${bobs[i]!.key} what is the plan`)),
            );
            await watcher.waitFor(flows * RUNS_PER_FLOW, 120_000, "flow runs");
          });
        };
        await flowWindow(); // warm-up
        await eachRound(ctx, [flowRt, flowCmd], async (i) => {
          const plain = await plainWindow();
          const flow = await flowWindow();
          const d = minus(flow, plain);
          flowRt.measured.push(d.roundTrips / flows);
          flowRt.baseline.push(bareRounds[i]!.rt);
          flowCmd.measured.push(d.server / flows);
          flowCmd.baseline.push(bareRounds[i]!.cmd);
          if (i === 0) {
            notes.push(
              `sessions_send flow, whole chain including the asking turn: ` +
                `${(flow.client.roundTrips / flows).toFixed(1)} round trips, ` +
                `${(flow.serverTotal / flows).toFixed(1)} Redis commands; ` +
                `the asking turn alone (a plain alice turn): ${(plain.client.roundTrips / flows).toFixed(1)} ` +
                `round trips, ${(plain.serverTotal / flows).toFixed(1)} commands.`,
            );
            notes.push(
              `sessions_send flow, client commands per flow (whole chain): ` +
                `${topEntries(flow.client.byName, flows, 14)}.`,
            );
          }
        });
      } finally {
        watcher.close();
        await sys.close();
        dep.cleanup();
      }
    }

    return {
      id: this.id,
      title: this.title,
      setup:
        `Per turn: ${n} echo turns over ${sessions} sessions enqueued at once (\`enqueueTurn\`), ` +
        `worker host concurrency ${CONCURRENCY}. ` +
        `Per flow: ${flows} concurrent conversations (at most half the ${CONCURRENCY} worker slots, ` +
        `since an asking turn holds its slot while it waits) of two script agents (the rules of ` +
        `examples/two-agents.json5, one alice/bob pair of sessions each): ` +
        `alice's turn calls sessions_send to bob and waits for his answer, ` +
        `then the reply-back loop (alice thanks, bob answers REPLY_SKIP) ` +
        `and bob's announce (recorded as a delivery without a route); ${RUNS_PER_FLOW} runs per flow. ` +
        `A flow's figure is the whole chain minus a plain alice turn measured in the same round, i.e. ` +
        `what the sessions_send adds to the turn that calls it. ` +
        `Baseline: ${n} bare BullMQ jobs added at once and processed by a no-op Worker with concurrency ` +
        `${CONCURRENCY}, counted the same way. ` +
        `Counting: client round trips and commands by wrapping ioredis \`Redis.prototype.sendCommand\` in ` +
        `the bench process (every client of the system under test; a pipeline or MULTI counts as one round ` +
        `trip; blocking commands of idle workers count; the bench's own clients do not); ` +
        `Redis commands from INFO commandstats deltas (commands inside Lua counted, INFO excluded). ` +
        `A window closes ${quietMs} ms after the last Redis command once every expected run finished, ` +
        `so wind-down work is included.`,
      rows: [turnRt, turnCmd, turnBytes, flowRt, flowCmd],
      notes,
    };
  },
};
