/**
 * Sessions left with turns and no drainer by an operator's action in Bull Board are re-armed by
 * the maintenance sweep (src/workers/stranded-sessions.ts; docs/design/runs.md, "Stranded
 * sessions"). Removing a session's drain job used to wedge it for good: its pending wake was
 * cleared when the drainer took the turn, later pushes found it busy and woke nobody, and doctor
 * said all was well. Real Redis, real BullMQ, the real scheduled sweep (every second here).
 */
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cleanUp, deploy, waitRun } from "../helpers/api.js";
import { FAST_WORKERS, type TestSystem } from "../helpers/system.js";
import { inbound, scriptConfig } from "../fixtures/runs-support.js";
import { tempDir } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";
import { checkQueues } from "../../src/doctor/checks.js";
import { requestDrain } from "../../src/runs/enqueue.js";
import { rearmOverdueWakes } from "../../src/workers/overdue-wakes.js";
import { STRANDED_STAT, strandedGraceMs } from "../../src/workers/stranded-sessions.js";

afterEach(cleanUp);

const RULES = [{ reply: "re: {{text}}" }];
/** The sweep every second; with FAST_WORKERS the grace is 6 s (three times the 2 s overdue threshold). */
const SWEEPS = { maintenance: { sweepEveryMs: 1000 } };

/** The session's drain job (drain jobs are deduplicated per session), if there is one. */
async function drainJob(sys: TestSystem, sessionKey: string) {
  const id = await sys.svc.queues.runs.getDeduplicationJobId(sessionKey);
  return id ? await sys.svc.queues.runs.getJob(id) : undefined;
}

/** Remove the session's drain job once it is in `state`, as Bull Board's "Remove" does (job.remove()). */
async function removeDrainJob(sys: TestSystem, sessionKey: string, state: string): Promise<void> {
  await settle(
    async () => {
      const job = await drainJob(sys, sessionKey);
      if (!job || (await job.getState()) !== state) return false;
      // Refused when a worker took it meanwhile (locked): looked at again.
      return await job.remove().then(
        () => true,
        () => false,
      );
    },
    { what: `the session's ${state} drain job removed`, timeoutMs: 20_000 },
  );
  expect(await drainJob(sys, sessionKey)).toBeUndefined();
}

const workScore = (sys: TestSystem, sessionKey: string) =>
  sys.svc.redis.zscore(sys.svc.keys.workSessions(), sessionKey);
const rearmedCount = async (sys: TestSystem) =>
  Number((await sys.svc.redis.hget(sys.svc.keys.stats(), STRANDED_STAT)) ?? 0);

describe("a session whose drain job an operator removed", () => {
  it("a parked turn's delayed drain job removed: the sweep re-arms the session, all turns run", async () => {
    const { dir: storage } = tempDir("sb-stranded-park");
    // A long park cap: the parked drain job stays delayed long enough to be removed.
    const sys = await deploy(
      scriptConfig(RULES, {
        storage: { dir: storage, faultRetryMaxDelayMs: 30_000 },
        workers: FAST_WORKERS,
        ...SWEEPS,
      }),
    );
    expect(strandedGraceMs(sys.config)).toBe(6000);
    const first = await inbound(sys, "parked", "hello");
    expect(await waitRun(sys, first.runId)).toMatchObject({ status: "ok" });
    const key = first.sessionKey;
    // The sessions directory replaced by a file (ENOTDIR): the next turn is parked.
    const dir = join(storage, "agents", "main", "sessions");
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    let restored = false;
    const restore = () => {
      if (restored) return;
      restored = true;
      rmSync(dir);
      renameSync(`${dir}.away`, dir);
    };
    try {
      const runs = [await inbound(sys, "parked", "one")];
      await settle(async () => (await (await drainJob(sys, key))?.isDelayed()) ?? false, {
        what: "the parked turn's delayed drain job",
      });
      runs.push(await inbound(sys, "parked", "two"), await inbound(sys, "parked", "three"));
      await removeDrainJob(sys, key, "delayed");
      // Nothing else wakes it: no pending wake, and the pushes behind the parked turn woke nobody.
      expect(await sys.svc.redis.zcard(sys.svc.keys.pendingWakes())).toBe(0);
      expect(await sys.svc.redis.llen(sys.svc.keys.inbox(key))).toBeGreaterThanOrEqual(2);
      restore();
      for (const [i, run] of runs.entries())
        expect(await waitRun(sys, run.runId, 30_000)).toMatchObject({
          status: "ok",
          reply: `re: ${["one", "two", "three"][i]}`,
        });
      expect(await rearmedCount(sys)).toBeGreaterThanOrEqual(1);
      // And a later message runs as usual.
      const later = await inbound(sys, "parked", "later");
      expect(await waitRun(sys, later.runId)).toMatchObject({ status: "ok", reply: "re: later" });
      // Once idle the session leaves the set (a later idle push adds it again).
      await settle(async () => (await workScore(sys, key)) === null, {
        what: "the idle session removed from work:sessions by a sweep",
        timeoutMs: 20_000,
      });
    } finally {
      restore();
    }
  }, 90_000);

  it('"drain-job", runs queue paused, waiting job removed: the wake is kept, turns run after resume', async () => {
    const sys = await deploy(scriptConfig(RULES, { workers: { ...FAST_WORKERS, wake: "drain-job" }, ...SWEEPS }));
    const queue = sys.svc.queues.runs;
    await queue.pause();
    let paused = true;
    try {
      const runs = [await inbound(sys, "paused", "one"), await inbound(sys, "paused", "two")];
      const key = runs[0]!.sessionKey;
      expect(await workScore(sys, key)).not.toBeNull();
      await removeDrainJob(sys, key, "waiting");
      // Past the overdue threshold (2 s), through several checks and sweeps: a paused queue's wake
      // waits on purpose (the checks mark it seen), so nothing is queued into the paused queue and
      // the session keeps its wake, which is what re-arms it once the queue is resumed.
      await new Promise((r) => setTimeout(r, 4000));
      expect(await sys.svc.redis.zcard(sys.svc.keys.pendingWakes())).toBe(1);
      expect((await queue.getJobCounts("waiting")).waiting ?? 0).toBe(0);
      await queue.resume();
      paused = false;
      for (const [i, run] of runs.entries())
        expect(await waitRun(sys, run.runId, 30_000)).toMatchObject({
          status: "ok",
          reply: `re: ${["one", "two"][i]}`,
        });
    } finally {
      if (paused) await queue.resume();
    }
  }, 60_000);
});

describe("switchboard doctor", () => {
  it("names a session with queued turns and no drainer, and says nothing once it has a drain job", async () => {
    // No workers: nothing drains, no sweep runs; the states are made by hand.
    const sys = await deploy(scriptConfig(RULES, { workers: { ...FAST_WORKERS, wake: "drain-job" } }), {
      gateway: true,
      workers: false,
    });
    const stranded = (f: { message: string }) => /no drainer/.test(f.message);
    const run = await inbound(sys, "doc", "one");
    const key = run.sessionKey;
    // A drain job waits and a wake is pending: not stranded.
    expect((await checkQueues(sys.svc)).filter(stranded)).toEqual([]);
    // The overdue check retires the wake (its add absorbed by the waiting job), then the job is removed.
    expect(await rearmOverdueWakes(sys.svc, 0)).toBe(1);
    expect((await checkQueues(sys.svc)).filter(stranded)).toEqual([]);
    await removeDrainJob(sys, key, "waiting");
    const warned = (await checkQueues(sys.svc)).filter(stranded);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: "warn" });
    expect(warned[0]!.message).toContain(`1 session with queued turns and no drainer (a drain job removed?): ${key}`);
    await requestDrain(sys.svc, key);
    expect((await checkQueues(sys.svc)).filter(stranded)).toEqual([]);
  });
});
