/**
 * A worker told to stop while Redis is away: handing its turns back needs Redis (the lease is
 * released and the job moved there), so past the grace it cannot, and waiting for it is waiting
 * for nothing. The process exits soon after its grace, as an orchestrator's kill timeout
 * expects; its turns are recovered as a crashed worker's are (lease expiry, stall check), once
 * Redis is back. A real `switchboard worker` process and a private redis-server it loses.
 */
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { spawnSwitchboard, startTestSystem, writeConfigFile, type TestSystem } from "../helpers/system.js";
import { expectTranscript, inbound, scriptConfig, timedWait, waitRunning } from "../fixtures/runs-support.js";

const GRACE_MS = 1000;
/** Lease TTL and BullMQ lock: how long the turn's recovery waits once Redis is back. */
const LEASE_TTL_MS = 4000;

let redis: PrivateRedis;
let sys: TestSystem;

beforeAll(async () => {
  redis = await startPrivateRedis({ appendonly: true });
  sys = await startTestSystem(
    scriptConfig([{ when: { regex: "slow" }, delayMs: 4000, reply: "done: {{text}}" }, { reply: "re: {{text}}" }], {
      redis: { url: redis.url },
      workers: { shutdownGraceMs: GRACE_MS, lockDurationMs: LEASE_TTL_MS, stalledIntervalMs: LEASE_TTL_MS },
    }),
    { gateway: true, workers: false },
  );
});

afterAll(async () => {
  await sys?.close();
  await redis?.cleanup();
}, 30_000);

describe("a worker stopped while Redis is down", () => {
  it("exits soon after its grace, not waiting for a hand-back it cannot do; the turn runs later", async () => {
    const w = await spawnSwitchboard(["worker", "--config", writeConfigFile(sys.config)], {
      REDIS_URL: sys.config.redis.url,
      SWITCHBOARD_STATE_DIR: sys.config.storage.dir,
      LOG_LEVEL: "warn",
    });
    try {
      const slow = await inbound(sys, "ann", "slow one");
      await waitRunning(sys, slow.runId, 10_000);
      await redis.stop();
      const t0 = Date.now();
      const exited = once(w.child, "exit");
      w.child.kill("SIGTERM");
      await exited;
      const ms = Date.now() - t0;
      // The grace, then a short settle: nothing it could still do needs more.
      expect(ms).toBeLessThan(GRACE_MS + 3000);
      expect(w.output()).toMatch(/grace over and Redis is not reachable/);

      await redis.start();
      // Recovered as a crashed worker's turn by a new worker: run again from the start.
      const b = await spawnSwitchboard(["worker", "--config", writeConfigFile(sys.config)], {
        REDIS_URL: sys.config.redis.url,
        SWITCHBOARD_STATE_DIR: sys.config.storage.dir,
        LOG_LEVEL: "warn",
      });
      try {
        const after = await inbound(sys, "ann", "after");
        expect((await timedWait(sys, slow.runId, 30_000)).result).toMatchObject({
          status: "ok",
          reply: "done: slow one",
        });
        expect((await timedWait(sys, after.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after" });
        expectTranscript(sys, slow, [
          ["slow one", "done: slow one"],
          ["after", "re: after"],
        ]);
      } finally {
        b.kill9();
      }
    } finally {
      w.kill9();
    }
  }, 60_000);
});
