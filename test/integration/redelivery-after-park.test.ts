/**
 * switchboard_redeliveries_total after a park: a turn parked on a storage fault is begun again by
 * design (not a redelivery), but when the attempt that resumed it dies with its worker (kill -9),
 * the attempt after that is a redelivery like any other, counted once.
 *
 * The turn parks before its runtime runs: it carries the archive of the transcript its `/new`
 * retired, and archiving stats a path whose directory was replaced by a file (ENOTDIR). So the
 * resumed attempt runs the (slow) runtime, and the worker is killed in the middle of it.
 */
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FAST_WORKERS, type ChildHandle, type TestSystem } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import { tempDir } from "../helpers/context.js";
import { getRun, inbound, scriptConfig, spawnWorker, timedWait } from "../fixtures/runs-support.js";
import { metricsUrlOf, scrape, valueOf } from "../helpers/prometheus.js";
import { settle } from "../helpers/settle.js";

// Long enough to see the resumed attempt running and kill its worker in the middle of it.
const SLOW_MS = 6000;

afterEach(cleanUp);

async function worker(sys: TestSystem): Promise<ChildHandle> {
  const w = await spawnWorker(sys.config);
  onCleanUp(() => w.kill9());
  return w;
}

describe("a parked run resumed and then lost to a worker crash", () => {
  it("counts as redelivered exactly once", async () => {
    const { dir: storage } = tempDir("sb-park-crash");
    onCleanUp(async () => rmSync(storage, { recursive: true, force: true }));
    const sys = await deploy(
      scriptConfig(
        [
          { when: { regex: "slow" }, delayMs: SLOW_MS, reply: "done: {{text}}" },
          { delayMs: 5, reply: "re: {{text}}" },
        ],
        {
          // The first retry after a park comes 0.8-1.2 s later: time for the test to see the park
          // and give the directory back before attempt 2 (a shorter one could park it again).
          storage: { dir: storage, faultRetryMaxDelayMs: 2000 },
          workers: { ...FAST_WORKERS, metricsPort: 0 },
        },
      ),
      { gateway: true, workers: false },
    );
    const a = await worker(sys);
    const first = await inbound(sys, "parkcrash", "hello");
    expect((await timedWait(sys, first.runId, 10_000)).result).toMatchObject({ status: "ok" });

    const dir = join(storage, "agents", "main", "sessions");
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    const r = await inbound(sys, "parkcrash", "/new slow after the reset");
    // Attempt 1 parked before its runtime ran (archiving the retired transcript failed).
    await settle(async () => (await sys.svc.runs.get(r.runId))?.parkedAttempt === 1, {
      what: "the turn parked by its first attempt",
      timeoutMs: 10_000,
    });
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    // Attempt 2 resumes it and runs the slow runtime: its worker dies in the middle.
    await settle(
      async () => {
        const rec = await getRun(sys, r.runId);
        return rec.status === "running" && rec.attempts === 2;
      },
      { what: "the resumed attempt running", timeoutMs: 10_000 },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    await a.kill9();

    const b = await worker(sys);
    expect((await timedWait(sys, r.runId, 30_000)).result).toMatchObject({
      status: "ok",
      reply: "done: slow after the reset",
    });
    expect(await getRun(sys, r.runId)).toMatchObject({ attempts: 3, parkedAttempt: 1 });
    const m = await settle(
      async () => {
        const e = await scrape(metricsUrlOf(b));
        return valueOf(e, "switchboard_runs_total", { status: "ok" }) >= 1 ? e : null;
      },
      { what: "worker B's metrics counting the run" },
    );
    expect(valueOf(m, "switchboard_redeliveries_total")).toBe(1);
  }, 90_000);
});
