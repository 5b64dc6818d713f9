/**
 * BullMQ dates a delayed job on the clock of the process that delays it. A worker whose clock
 * ran two hours ahead (a reviewer, with faketime) parked a session's drain job two hours into
 * the future; once that worker was replaced by a correct one, the session's messages stayed
 * queued for those two hours. The overdue check now promotes drain jobs delayed further ahead
 * than Switchboard ever delays one (src/workers/overdue-wakes.ts).
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { addJob } from "../../src/queues/jobs.js";
import { SessionLeases } from "../../src/runs/session-lease.js";
import { maxDrainDelayMs, promoteRunawayDrains, RUNAWAY_DELAY_MARGIN_MS } from "../../src/workers/overdue-wakes.js";
import { testConfig } from "../helpers/context.js";
import {
  FAST_WORKERS,
  spawnSwitchboard,
  startPeer,
  startTestSystem,
  writeConfigFile,
  type TestSystem,
} from "../helpers/system.js";

const CLOCK_AHEAD_MS = 2 * 3600_000;

/** libfaketime's preload library (what the `faketime` command uses), wherever the distribution put it. */
function libfaketime(): string {
  for (const base of ["/usr/lib", "/usr/local/lib", "/usr/lib64"]) {
    if (!existsSync(base)) continue;
    const dirs = [base, ...readdirSync(base).map((d) => join(base, d))];
    for (const dir of dirs) {
      const lib = join(dir, "faketime", "libfaketime.so.1");
      if (existsSync(lib)) return lib;
    }
  }
  throw new Error("libfaketime not found: install faketime (apt-get install faketime)");
}

/** The drain job's due time in the delayed set of the runs queue, minus Redis's now (ms); undefined if none. */
async function drainDueInMs(sys: TestSystem, sessionKey: string): Promise<number | undefined> {
  const queue = sys.svc.queues.runs;
  const now = await sys.svc.wakes.now();
  const delayed = await sys.svc.redis.zrange(queue.toKey("delayed"), 0, -1, "WITHSCORES");
  for (let i = 0; i + 1 < delayed.length; i += 2) {
    const job = await queue.getJob(delayed[i]!);
    if (job?.name === "drain" && job.data.sessionKey === sessionKey)
      return Math.floor(Number(delayed[i + 1]) / 0x1000) - now;
  }
  return undefined;
}

let sys: TestSystem;
beforeAll(async () => {
  // The gateway alone: workers come from the test, one with its clock ahead, then correct ones.
  sys = await startTestSystem(
    {
      workers: FAST_WORKERS,
      agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok: {{text}}" }] } }] },
    },
    { gateway: true, workers: false },
  );
});
afterAll(async () => {
  await sys?.close();
});

describe("drain jobs delayed by a worker whose clock is ahead of Redis's", () => {
  it("leaves drain jobs delayed within what Switchboard asks for, and reads only past the bound", async () => {
    // The longest delay of the default config: BullMQ's backoff before a drain job's 10th attempt.
    expect(maxDrainDelayMs(testConfig())).toBe(500 * 2 ** 8);
    // A parked turn's cap (with its jitter) counts when it is the longest.
    expect(maxDrainDelayMs(testConfig({ storage: { faultRetryMaxDelayMs: 600_000 } }))).toBe(720_000);

    const sessionKey = "agent:main:clock-fine";
    const delay = maxDrainDelayMs(sys.config) + RUNAWAY_DELAY_MARGIN_MS - 10_000;
    const job = await addJob(sys.svc, "drain", { sessionKey }, { delay });
    try {
      expect(await promoteRunawayDrains(sys.svc)).toBe(0);
      expect(await job.getState()).toBe("delayed");
      // The bound is dated from the `now` the check is given (Redis's): seen a minute earlier, the
      // job is past it, as if its delayer's clock were a minute ahead; the warning says by how much.
      const warn = vi.fn();
      const earlier = (await sys.svc.wakes.now()) - 60_000;
      const log = { ...sys.svc.log, warn } as unknown as typeof sys.svc.log;
      expect(await promoteRunawayDrains({ ...sys.svc, log }, earlier)).toBe(1);
      expect(await job.getState()).toBe("waiting");
      expect(warn).toHaveBeenCalledTimes(1);
      const [fields, message] = warn.mock.calls[0]!;
      expect(fields).toMatchObject({ promoted: 1, sessions: [sessionKey] });
      // At least: a minute less the time since the job was added.
      expect(fields.clockAheadMs).toBeGreaterThan(55_000);
      expect(fields.clockAheadMs).toBeLessThanOrEqual(61_000);
      expect(message).toMatch(/clock at least (5[5-9]|6[01]) s ahead of Redis's/);
    } finally {
      await job.remove().catch(() => undefined);
    }
  });

  it("are promoted by the overdue check once correct workers run, and the session's turn runs", async () => {
    const sessionKey = "agent:main:clock-ahead";
    // Held here, so the skewed worker's drains find the session busy and wait (lease polls).
    const leases = new SessionLeases(sys.svc.redis, sys.svc.keys, 60_000);
    const held = await leases.tryAcquire(sessionKey);
    if (!held.acquired) throw new Error("the session lease was not taken");

    const skewed = await spawnSwitchboard(["worker", "--config", writeConfigFile(sys.config)], {
      REDIS_URL: sys.config.redis.url,
      SWITCHBOARD_STATE_DIR: sys.config.storage.dir,
      LD_PRELOAD: libfaketime(),
      FAKETIME: `+${CLOCK_AHEAD_MS / 1000}s`,
    });
    let stopped = false;
    let peer: TestSystem | undefined;
    try {
      const { runId } = await sys.rpc("agent", { sessionKey, message: "hello" });
      // Its lease polls are dated on its clock: two hours from Redis's now.
      const deadline = Date.now() + 15_000;
      let dueIn: number | undefined;
      while (Date.now() < deadline) {
        dueIn = await drainDueInMs(sys, sessionKey);
        if (dueIn !== undefined && dueIn > CLOCK_AHEAD_MS / 2) break;
        await sleep(100);
      }
      expect(dueIn).toBeGreaterThan(CLOCK_AHEAD_MS / 2);
      // Replaced: a drain under way when it stops finds the lease held and is delayed as before.
      await skewed.stop();
      stopped = true;
      expect(await drainDueInMs(sys, sessionKey)).toBeGreaterThan(CLOCK_AHEAD_MS / 2);
      await held.lease.release();

      peer = await startPeer(sys.config, { workers: {} });
      // Without the promotion the turn stays queued behind the parked drain job for two hours.
      expect(await sys.rpc("agent.wait", { runId, timeoutMs: 15_000 })).toMatchObject({
        status: "ok",
        reply: "ok: hello",
      });
      expect(await drainDueInMs(sys, sessionKey)).toBeUndefined();
    } finally {
      if (!stopped) await skewed.kill9();
      await peer?.close();
      await held.lease.release().catch(() => false);
    }
  }, 90_000);
});
