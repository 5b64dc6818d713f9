/**
 * Chaos: real gateway and worker processes under a steady stream of messages while worker
 * processes are killed -9 at random moments, Redis (AOF) is killed -9 and restarted, and a
 * gateway is killed -9 while clients wait on it. Verdict: no acknowledged message lost, nothing
 * doubled, every session's messages in send order, every wait answered or honestly timed out.
 *
 * Bounded by default (1,000+ messages, about a minute); CHAOS_SCALE=N runs N times the
 * messages, kills and restarts over N times the window. CHAOS_SEED=S replays the random
 * choices of a run (its summary line prints the seed).
 */
import { afterAll, describe, expect, it } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { newRedis, testConfig } from "../helpers/context.js";
import { FAST_WORKERS } from "../helpers/system.js";
import { readTranscript, scriptConfig } from "../fixtures/runs-support.js";
import { ChaosCluster } from "./cluster.js";
import { GatewayClient } from "./gateway-client.js";
import { seededRandom, type Random } from "./random.js";
import { DELAY_BUCKETS_MS, runSessionClient, type ChaosLog, type SentMessage } from "./session-client.js";
import { checkRuns, checkTimedOutWaits, checkTranscript, type FinalRun } from "./verify.js";
import { settle } from "../helpers/settle.js";

const SCALE = Math.max(1, Number(process.env.CHAOS_SCALE ?? 1));
const SEED = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
const SESSIONS = 100;
const MESSAGES_PER_SESSION = 10 * SCALE;
const WINDOW_MS = 20_000 * SCALE;
const WORKERS = 3;
const WORKER_KILLS = 12 * SCALE;
const WAIT_CHANCE = 0.5;
const WAIT_PATH = "/v1/rpc/agent.wait";

let cluster: ChaosCluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

/** Moments (ms into the window) spread at random over its middle 90 %. */
function moments(rnd: Random, count: number): number[] {
  return Array.from({ length: count }, () => WINDOW_MS * (0.05 + 0.9 * rnd.next())).sort((a, b) => a - b);
}

async function at(startAt: number, offsetMs: number): Promise<void> {
  const ms = startAt + offsetMs - Date.now();
  if (ms > 0) await sleep(ms);
}

async function workerChaos(c: ChaosCluster, rnd: Random, startAt: number): Promise<void> {
  for (const t of moments(rnd, WORKER_KILLS)) {
    await at(startAt, t);
    await c.killWorker(rnd);
  }
}

/**
 * Per SCALE slice of the window: one Redis restart early in it, one gateway kill while waits are
 * pending in its middle (a send that gateway was handling may stall its session until the dead
 * gateway's messageId claim expires, 30 s: that must fit in the test's time).
 */
async function infraChaos(c: ChaosCluster, client: GatewayClient, rnd: Random, startAt: number): Promise<void> {
  const slice = WINDOW_MS / SCALE;
  for (let k = 0; k < SCALE; k++) {
    await at(startAt, slice * (k + 0.15 + 0.15 * rnd.next()));
    await c.restartRedis(rnd.int(200, 1500));
    await at(startAt, slice * (k + 0.45 + 0.2 * rnd.next()));
    const slot = k % 2;
    await settle(() => client.pending(slot, WAIT_PATH) >= 2, {
      what: `2 agent.wait requests pending on gateway ${slot}`,
      timeoutMs: 20_000,
      stepMs: 5,
    });
    await c.killGateway(slot, rnd.int(300, 1500));
  }
}

/** How every acknowledged run ended, asked with `agent.wait` until it is terminal. */
async function finalRuns(client: GatewayClient, sent: SentMessage[]): Promise<Map<string, FinalRun | string>> {
  const finals = new Map<string, FinalRun | string>();
  const runIds = sent.filter((m) => m.acked && m.runId).map((m) => m.runId!);
  const deadline = Date.now() + 60_000 * SCALE;
  for (let i = 0; i < runIds.length; i += 100) {
    await Promise.all(
      runIds.slice(i, i + 100).map(async (runId) => {
        for (;;) {
          const out = await client.call(
            WAIT_PATH,
            { runId, timeoutMs: 10_000 },
            { preferred: 0, attemptTimeoutMs: 15_000, deadlineMs: 30_000 },
          );
          const r = out.body?.result;
          if (out.status === 200 && out.body.ok && r.status !== "timeout")
            return void finals.set(runId, { status: r.status, reply: r.reply, endedAt: r.endedAt });
          if (out.status !== undefined && !(out.status === 200 && out.body.ok))
            return void finals.set(runId, `${out.status} ${JSON.stringify(out.body)}`);
          if (Date.now() > deadline)
            return void finals.set(runId, `not finished: ${JSON.stringify(out.body ?? out.failures)}`);
        }
      }),
    );
  }
  return finals;
}

/**
 * When each run's record turned terminal, by Redis's clock (`terminalAt`, set by the finish),
 * in place of the worker's `endedAt`: a finish held in a worker's command queue through the
 * Redis restart lands after its endedAt, and a wait sent in between honestly times out.
 */
async function useTerminalTimes(c: ChaosCluster, finals: Map<string, FinalRun | string>): Promise<void> {
  const keys = new RedisKeys(c.config.redis.prefix);
  const redis = newRedis(c.redis.url);
  try {
    for (const [runId, f] of finals) {
      if (typeof f !== "object") continue;
      const at = await redis.hget(keys.run(runId), "terminalAt");
      if (at) f.endedAt = Number(at);
    }
  } finally {
    redis.disconnect();
  }
}

/** Nothing is left queued or in flight in any session once every run has finished. */
async function leftovers(c: ChaosCluster, sent: SentMessage[]): Promise<string[]> {
  const keys = new RedisKeys(c.config.redis.prefix);
  const redis = newRedis(c.redis.url);
  try {
    const problems: string[] = [];
    for (const sessionKey of new Set(sent.map((m) => m.sessionKey).filter((k): k is string => Boolean(k)))) {
      const [queued, inflight] = await Promise.all([
        redis.llen(keys.inbox(sessionKey)),
        redis.llen(keys.inflight(sessionKey)),
      ]);
      if (queued || inflight)
        problems.push(`${sessionKey}: ${queued} queued, ${inflight} in flight after every run finished`);
    }
    return problems;
  } finally {
    redis.disconnect();
  }
}

describe("chaos", () => {
  it(
    `${SESSIONS * MESSAGES_PER_SESSION} messages over ${SESSIONS} sessions through worker kills, ` +
      `a Redis restart and a gateway kill: nothing lost, doubled or reordered`,
    async () => {
      const t0 = Date.now();
      const rules = DELAY_BUCKETS_MS.map((delayMs, i) => ({
        when: { contains: `~d${i}~` },
        delayMs,
        reply: "re: {{text}}",
      }));
      const c = (cluster = await ChaosCluster.start(
        (url) => testConfig(scriptConfig(rules, { workers: { ...FAST_WORKERS } }), url),
        WORKERS,
      ));
      const client = new GatewayClient(c.gatewayUrls);
      const log: ChaosLog = { messages: [], waits: [], problems: [] };

      const startAt = Date.now() + 200;
      const sessions = Array.from({ length: SESSIONS }, (_, i) =>
        runSessionClient(
          {
            index: i,
            path: i % 2 === 0 ? "inbound" : "agent",
            messages: MESSAGES_PER_SESSION,
            startAt,
            windowMs: WINDOW_MS,
            waitChance: WAIT_CHANCE,
            sendDeadlineMs: 60_000,
          },
          client,
          seededRandom(SEED + 1 + i),
          log,
        ),
      );
      await Promise.all([
        ...sessions,
        workerChaos(c, seededRandom(SEED - 1), startAt),
        infraChaos(c, client, seededRandom(SEED - 2), startAt),
      ]);
      const sendsDoneAt = Date.now();

      const finals = await finalRuns(client, log.messages);
      await useTerminalTimes(c, finals);
      const problems = [...log.problems, ...checkRuns(log.messages, finals), ...checkTimedOutWaits(log.waits, finals)];
      for (let s = 0; s < SESSIONS; s++) {
        const sent = log.messages.filter((m) => m.session === s).sort((a, b) => a.seq - b.seq);
        const sessionIds = new Set(sent.map((m) => m.sessionId).filter(Boolean));
        if (sessionIds.size !== 1) {
          problems.push(`session ${s}: ${sessionIds.size} session ids ${[...sessionIds].join(", ")}`);
          continue;
        }
        problems.push(...checkTranscript(s, sent, readTranscript(c.config, [...sessionIds][0]!)));
      }
      problems.push(...(await leftovers(c, log.messages)));

      const acked = log.messages.filter((m) => m.acked).length;
      const retriedSends = log.messages.filter((m) => m.attempts > 1).length;
      const waitsAnswered = log.waits.filter((w) => w.outcome === "answered").length;
      const waitsTimedOut = log.waits.filter((w) => w.outcome === "timeout").length;
      const waitsFailedOver = log.waits.filter((w) => w.failures.includes("network")).length;
      const { workerKills, redisRestarts, gatewayKills } = c.counters;
      console.log(
        `chaos: ${log.messages.length} messages (${acked} acked, ${retriedSends} retried, ` +
          `${log.messages.filter((m) => m.duplicate).length} duplicate acks) ` +
          `over ${SESSIONS} sessions; ${workerKills} worker kills, ${redisRestarts} redis restarts, ` +
          `${gatewayKills} gateway kills; ` +
          `waits ${waitsAnswered} answered, ${waitsTimedOut} timed out then finished, ` +
          `${waitsFailedOver} failed over; ` +
          `sends ${((sendsDoneAt - startAt) / 1000).toFixed(1)} s, total ${((Date.now() - t0) / 1000).toFixed(1)} s; ` +
          `problems ${problems.length}; scale ${SCALE} seed ${SEED}`,
      );

      expect(problems).toEqual([]);
      expect(log.messages.length).toBe(SESSIONS * MESSAGES_PER_SESSION);
      // Every send was answered in the end (retried with the same key through the outages).
      expect(acked).toBe(log.messages.length);
      // The chaos really happened, and the paths it is meant to exercise were taken.
      expect(workerKills).toBeGreaterThanOrEqual(10 * SCALE);
      expect(redisRestarts).toBe(SCALE);
      expect(gatewayKills).toBe(SCALE);
      expect(retriedSends).toBeGreaterThan(0);
      expect(waitsFailedOver).toBeGreaterThan(0);
      expect(waitsAnswered + waitsTimedOut).toBe(log.waits.length);
    },
    120_000 + 2 * WINDOW_MS,
  );
});
