/**
 * Pausing the `runs` queue (Bull Board's pause button, or `Queue.pause()`) holds every session's
 * turns: sessions woken from the ready list are not popped, and a drain under way stops between
 * two turns and hands its session back (src/workers/queue-pauses.ts). Resuming runs them all, in
 * order, once each. Both wake-ups: the ready list (default) and drain jobs.
 */
import { afterEach, describe, expect, it } from "vitest";
import { cleanUp, deploy, getRun, userTexts, waitRun, waitRunning } from "../helpers/api.js";
import { FAST_WORKERS, type TestSystem } from "../helpers/system.js";
import { inbound, scriptConfig } from "../fixtures/runs-support.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { checkQueues } from "../../src/doctor/checks.js";
import { PAUSE_POLL_MS } from "../../src/workers/queue-pauses.js";

afterEach(cleanUp);

const RULES = [{ when: { contains: "slow" }, delayMs: 2000, reply: "re: {{text}}" }, { reply: "re: {{text}}" }];

/** Pause or resume `runs` through Bull Board's own API, as an operator's click does. */
async function board(sys: TestSystem, action: "pause" | "resume"): Promise<void> {
  const res = await fetch(`${sys.url}/admin/queues/api/queues/runs/${action}`, {
    method: "PUT",
    headers: sys.config.gateway.auth.token ? { authorization: `Bearer ${sys.config.gateway.auth.token}` } : {},
  });
  expect(res.status, `board ${action}`).toBe(200);
}

/** Long enough for every worker to have read the flag again (it reads it every PAUSE_POLL_MS). */
const seen = () => new Promise((r) => setTimeout(r, PAUSE_POLL_MS * 2.5));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Finished ok, in one attempt (begun once: a turn held back was never begun). */
async function ranOnce(sys: TestSystem, runId: string): Promise<void> {
  expect(await waitRun(sys, runId)).toMatchObject({ status: "ok" });
  expect((await getRun(sys, runId)).attempts).toBe(1);
}

const pausedFinding = (f: { message: string }) => /^runs is paused/.test(f.message);

async function statuses(sys: TestSystem, runIds: string[]): Promise<string[]> {
  return await Promise.all(runIds.map(async (id) => (await getRun(sys, id)).status));
}

describe.each([{ wake: "ready-list" as const }, { wake: "drain-job" as const }])(
  "pausing the runs queue (workers.wake: $wake)",
  ({ wake }) => {
    // A 10 s lease unless a test needs FAST_WORKERS' 2 s one: ranOnce counts attempts, and a
    // lease lost to a stalled event loop on a loaded machine would begin a turn a second time.
    const config = (lease: { lockDurationMs: number } = { lockDurationMs: 10_000 }) =>
      scriptConfig(RULES, { workers: { ...lease, concurrency: 4, wake } });

    it("holds turns queued while paused, then runs each once, in order, after resume", async () => {
      const sys = await deploy(config());
      await board(sys, "pause");
      await seen();
      const runs = [];
      for (const from of ["ann", "ben", "cy"])
        for (const text of ["one", "two"]) runs.push(await inbound(sys, from, text));
      await sleep(1500);
      expect(
        await statuses(
          sys,
          runs.map((r) => r.runId),
        ),
      ).toEqual(runs.map(() => "queued"));
      const boardPaused = await sys.get("/admin/queues/api/queues?activeQueue=ready&page=1&jobsPerPage=10");
      const shown = (boardPaused.body.queues as { name: string; isPaused: boolean }[]).filter((q) =>
        ["runs", "ready"].includes(q.name),
      );
      expect(shown.map((q) => [q.name, q.isPaused]).sort()).toEqual([
        ["ready", true],
        ["runs", true],
      ]);
      // An operator who looks elsewhere is told too: `switchboard status` and `doctor`.
      const token = sys.config.gateway.auth.token;
      const status = await runCli(["status", "--url", sys.url, ...(token ? ["--token", token] : [])], cliEnv({}));
      expect(status.code, show(status)).toBe(0);
      expect(status.stdout).toContain("Paused:  runs (turns held until resumed in Bull Board, /admin/queues)\n");
      expect((await checkQueues(sys.svc)).filter(pausedFinding)).toHaveLength(1);

      await board(sys, "resume");
      for (const r of runs) await ranOnce(sys, r.runId);
      for (const r of runs.filter((_, i) => i % 2 === 0))
        expect(await userTexts(sys, r.sessionKey)).toEqual(["one", "two"]);
      expect((await checkQueues(sys.svc)).filter(pausedFinding)).toEqual([]);
    });

    it("stops a session's drain between two turns, and goes on after resume", async () => {
      const sys = await deploy(config());
      const runs = [];
      for (const text of ["slow 1", "two", "three", "four"]) runs.push(await inbound(sys, "dee", text));
      await waitRunning(sys, runs[0]!.runId);
      await board(sys, "pause");
      // The slow first turn (2 s) outlasts the time the pause takes to be seen: it finishes, and
      // no later turn begins.
      expect(await waitRun(sys, runs[0]!.runId)).toMatchObject({ status: "ok" });
      await sleep(PAUSE_POLL_MS * 1.5);
      expect(
        await statuses(
          sys,
          runs.slice(1).map((r) => r.runId),
        ),
      ).toEqual(["queued", "queued", "queued"]);

      await board(sys, "resume");
      for (const r of runs) await ranOnce(sys, r.runId);
      expect(await userTexts(sys, runs[0]!.sessionKey)).toEqual(["slow 1", "two", "three", "four"]);
    });

    it("a turn the finish began just as the pause was seen still runs; the next is held, never begun", async () => {
      const sys = await deploy(config());
      // The pause is read by the workers while the first turn's finish is on its way: the finish
      // was asked (flag not yet seen) to begin the second turn in the same step.
      // The first finish waits until all three messages are queued: a first turn that finished
      // before "two" was pushed began nothing, and "two" then waited in the paused queue.
      const records = sys.svc.runs;
      const finishStep = records.finishStep.bind(records);
      let allQueued!: () => void;
      const queued = new Promise<void>((resolve) => (allQueued = resolve));
      let first = true;
      records.finishStep = async (...args) => {
        if (first) await queued;
        const res = await finishStep(...args);
        if (first) {
          first = false;
          await sys.svc.queues.runs.pause();
          await seen();
        }
        return res;
      };
      const runs = [];
      for (const text of ["one", "two", "three"]) runs.push(await inbound(sys, "eve", text));
      allQueued();
      expect(await waitRun(sys, runs[1]!.runId)).toMatchObject({ status: "ok" });
      await sleep(PAUSE_POLL_MS * 1.5);
      expect(await getRun(sys, runs[2]!.runId)).toMatchObject({ status: "queued" });
      await board(sys, "resume");
      for (const r of runs) await ranOnce(sys, r.runId);
    });

    it("the overdue-wake checks leave a paused queue's wakes where they are", async () => {
      // Wakes are overdue after 2 s here (FAST_WORKERS' lease), checked every second by each
      // consumer and by a sweep every second: a check that re-armed them would move them into the
      // paused queue as drain jobs, emptying the ready list the board shows.
      const sys = await deploy({ ...config(FAST_WORKERS), maintenance: { sweepEveryMs: 1000 } });
      await board(sys, "pause");
      await seen();
      const runs = [];
      for (const from of ["fay", "gus", "hal"]) runs.push(await inbound(sys, from, "hi"));
      const wakes = async () => (await sys.svc.redis.zrange(sys.svc.keys.pendingWakes(), 0, -1)).sort();
      const before = await wakes();
      expect(before).toHaveLength(3);
      await sleep(5000);
      expect(await wakes()).toEqual(before);
      if (wake === "ready-list") expect(await sys.svc.redis.llen(sys.svc.keys.readyList())).toBe(3);
      // Only the drain jobs the pushes asked for (drain-job), none added by a re-arm.
      const counts = await sys.svc.queues.runs.getJobCounts("waiting", "delayed");
      expect((counts.waiting ?? 0) + (counts.delayed ?? 0)).toBe(wake === "ready-list" ? 0 : 3);
      await board(sys, "resume");
      for (const r of runs) await ranOnce(sys, r.runId);
    });
  },
);
