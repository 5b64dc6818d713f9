/**
 * Prometheus metrics from real processes: a gateway (this process, no workers) and a
 * `switchboard worker` OS process serving its own registry on `workers.metricsPort`. After a
 * known number of turns, the worker's histograms and counters count exactly those turns and the
 * gateway shows HTTP latency by route pattern plus the deployment-wide series read from Redis.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT, startTestSystem, type TestSystem } from "../helpers/system.js";
import { tempDir } from "../helpers/context.js";
import { inbound, scriptConfig, spawnWorker, timedWait } from "../fixtures/runs-support.js";
import {
  type Exposition,
  gatewayMetrics,
  metricsUrlOf,
  samplesOf,
  scrape,
  since,
  valueOf,
} from "../helpers/prometheus.js";
import { settle } from "../helpers/settle.js";

const TURN_MS = 40;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

function expectValidExposition(e: Exposition): void {
  expect(e.duplicateTypes).toEqual([]);
  // Node's default process metrics, from prom-client.
  expect(valueOf(e, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
  expect(valueOf(e, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
}

describe("metrics", () => {
  it("a worker's port counts its turns; the gateway shows HTTP latency by route and the deployment", async () => {
    const sys: TestSystem = await startTestSystem(
      scriptConfig([{ delayMs: TURN_MS, reply: "re: {{text}}" }], { workers: { metricsPort: 0 } }),
      { gateway: true, workers: false },
    );
    cleanups.push(() => sys.close());
    // This process's counters are process-wide: the gateway's are counted from here.
    const g0 = await gatewayMetrics(sys);
    const worker = await spawnWorker(sys.config);
    cleanups.push(() => worker.stop());
    const workerMetrics = metricsUrlOf(worker);

    // Before any turn: the instruments exist, at zero.
    const before = await scrape(workerMetrics);
    expect(before.types.get("switchboard_turn_duration_seconds")).toBe("histogram");
    expect(valueOf(before, "switchboard_queue_wait_seconds_count")).toBe(0);

    const senders = ["alice", "bob", "carol"];
    const sent = [];
    for (let round = 1; round <= 2; round++)
      for (const from of senders) sent.push(await inbound(sys, from, `${from}-${round}`));
    for (const s of sent) expect((await timedWait(sys, s.runId, 15_000)).result).toMatchObject({ status: "ok" });
    const turns = sent.length;

    // A turn is counted just after its record is published, its reply delivered a little later:
    // wait until the worker has counted them all, then check the exact numbers.
    const w = await settle(
      async () => {
        const e = await scrape(workerMetrics);
        return valueOf(e, "switchboard_deliveries_total", { status: "delivered" }) >= turns &&
          valueOf(e, "switchboard_runs_total") >= turns
          ? e
          : null;
      },
      { what: "the worker's metrics counting every run and delivery" },
    );
    expectValidExposition(w);
    // Every turn once: the duration histogram's count is the number of turns run.
    expect(valueOf(w, "switchboard_turn_duration_seconds_count", { status: "ok" })).toBe(turns);
    expect(valueOf(w, "switchboard_turn_duration_seconds_count")).toBe(turns);
    const durationSum = valueOf(w, "switchboard_turn_duration_seconds_sum");
    expect(durationSum).toBeGreaterThanOrEqual((turns * TURN_MS * 0.9) / 1000);
    expect(durationSum).toBeLessThan(turns * 10);
    // The +Inf bucket holds every observation; buckets are cumulative.
    const buckets = samplesOf(w, "switchboard_turn_duration_seconds_bucket", { status: "ok" }).map((s) => s.value);
    expect(buckets.at(-1)).toBe(turns);
    expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
    expect(valueOf(w, "switchboard_runs_total", { status: "ok" })).toBe(turns);
    expect(valueOf(w, "switchboard_queue_wait_seconds_count")).toBe(turns);
    const queueWait = valueOf(w, "switchboard_queue_wait_seconds_sum");
    expect(queueWait).toBeGreaterThanOrEqual(0);
    expect(queueWait).toBeLessThan(turns * 15);
    // One lease acquisition per drain: at least one per session, at most one per turn plus retries.
    const leases = valueOf(w, "switchboard_lease_wait_seconds_count");
    expect(leases).toBeGreaterThanOrEqual(senders.length);
    expect(leases).toBeLessThanOrEqual(turns * 3);
    expect(valueOf(w, "switchboard_redeliveries_total")).toBe(0);
    expect(valueOf(w, "switchboard_deliveries_total", { status: "delivered" })).toBe(turns);
    expect(valueOf(w, "switchboard_announce_failures_total")).toBe(0);
    // Per-process only: the deployment-wide series are the gateway's to serve.
    expect(samplesOf(w, "switchboard_sessions")).toEqual([]);
    expect(samplesOf(w, "switchboard_http_request_duration_seconds_count")).toEqual([]);
    expect((await fetch(workerMetrics.replace(/\/metrics$/, "/other"))).status).toBe(404);

    // The gateway: a few more requests with ids in their paths, and one that matches no route.
    expect((await sys.get(`/v1/runs/${sent[0]!.runId}`)).status).toBe(200);
    expect((await sys.get(`/v1/runs/${sent[1]!.runId}`)).status).toBe(200);
    expect((await sys.get("/no/such/route")).status).toBe(404);
    const g = await gatewayMetrics(sys);
    expectValidExposition(g);
    const http = (labels: Record<string, string>) =>
      since(g0, g, "switchboard_http_request_duration_seconds_count", labels);
    expect(http({ method: "POST", route: "/v1/inbound", status_code: "202" })).toBe(turns);
    expect(http({ method: "POST", route: "/v1/rpc/:method", status_code: "200" })).toBe(turns);
    expect(http({ method: "GET", route: "/v1/runs/:id", status_code: "200" })).toBe(2);
    expect(http({ route: "(unmatched)", status_code: "404" })).toBe(1);
    // Route patterns only: no series per run id or raw path.
    const routes = new Set(samplesOf(g, "switchboard_http_request_duration_seconds_count").map((s) => s.labels.route));
    for (const r of routes) expect(r).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}|\/no\/such/);
    expect(since(g0, g, "switchboard_http_request_duration_seconds_sum", { route: "/v1/inbound" })).toBeGreaterThan(0);

    // Deployment-wide, read from Redis at scrape time.
    const deployment = { deployment: sys.config.redis.prefix };
    expect(valueOf(g, "switchboard_sessions", deployment)).toBe(senders.length);
    expect(valueOf(g, "switchboard_run_workers", deployment)).toBeGreaterThanOrEqual(1);
    expect(valueOf(g, "switchboard_storage_healthy", deployment)).toBe(1);
    expect(valueOf(g, "switchboard_storage_faults_total", deployment)).toBe(0);
    expect(valueOf(g, "switchboard_runs_given_up_total", { ...deployment, reason: "poisoned" })).toBe(0);
    expect(valueOf(g, "switchboard_dead_letters", deployment)).toBe(0);
    expect(valueOf(g, "bullmq_job_count", { queue: "runs", state: "active" })).toBe(0);
    expect(samplesOf(g, "bullmq_job_count", { queue: "delivery" }).length).toBeGreaterThan(3);
    expect(g.types.get("bullmq_job_count")).toBe("gauge");
    // This gateway process runs no turns: it counted none.
    expect(since(g0, g, "switchboard_turn_duration_seconds_count")).toBe(0);

    // The example Grafana dashboard queries only series these processes serve.
    const dashboard = JSON.parse(readFileSync(join(ROOT, "examples/grafana-dashboard.json"), "utf8")) as {
      panels: { targets: { expr: string }[] }[];
    };
    const served = new Set([...w.samples, ...g.samples].map((x) => x.name));
    const queried = new Set(
      dashboard.panels.flatMap((p) =>
        p.targets.flatMap((t) => t.expr.match(/\b(?:switchboard|bullmq|process|nodejs)_[a-z_]+/g) ?? []),
      ),
    );
    expect(queried.size).toBeGreaterThan(10);
    for (const name of queried) expect(served.has(name), name).toBe(true);
  }, 60_000);

  it("BullMQ's completed and failed totals count the jobs workers finished", async () => {
    const sys = await startTestSystem(
      scriptConfig([{ reply: "re: {{text}}" }], {
        workers: { deliveryAttempts: 1, deliveryBackoffMs: 10 },
        // Nothing listens on port 1: each POST is refused, and with one attempt the job fails.
        channels: { down: { kind: "webhook", url: "http://127.0.0.1:1/hook" } },
      }),
    );
    cleanups.push(() => sys.close());
    const sessionKey = "agent:main:metrics-bull";
    for (const [channel, message] of [
      ["telegram", "one"],
      ["telegram", "two"],
      ["down", "three"],
    ] as const)
      expect((await sys.rpc("send", { sessionKey, channel, to: "x", message })).status).toBe("queued");
    const deployment = sys.config.redis.prefix;
    const g = await settle(
      async () => {
        const e = await gatewayMetrics(sys);
        const finished = (name: string) => valueOf(e, name, { queue: "delivery", deployment });
        return finished("bullmq_job_completed_total") + finished("bullmq_job_failed_total") >= 3 ? e : null;
      },
      { what: "the gateway's BullMQ totals counting the three delivery jobs" },
    );
    expect(valueOf(g, "bullmq_job_completed_total", { queue: "delivery", deployment })).toBe(2);
    expect(valueOf(g, "bullmq_job_failed_total", { queue: "delivery", deployment })).toBe(1);
    // The same numbers as the job counts (nothing removed the finished jobs yet).
    expect(valueOf(g, "bullmq_job_count", { queue: "delivery", state: "completed" })).toBe(2);
    expect(valueOf(g, "bullmq_job_count", { queue: "delivery", state: "failed" })).toBe(1);
    expect(g.types.get("bullmq_job_completed_total")).toBe("counter");
  }, 30_000);

  it("a turn parked on a storage fault and run again is not a redelivery", async () => {
    const { dir: storage } = tempDir("sb-metrics-park");
    const sys = await startTestSystem(
      scriptConfig([{ reply: "re: {{text}}" }], { storage: { dir: storage, faultRetryMaxDelayMs: 200 } }),
    );
    cleanups.push(() => sys.close());
    // Workers in this process: the gateway's /metrics serves the turn series too (one registry
    // per process, shared with this file's other systems: compare before and after).
    const scrapeGateway = () => gatewayMetrics(sys);
    const okRuns = (e: Awaited<ReturnType<typeof scrapeGateway>>) =>
      valueOf(e, "switchboard_runs_total", { status: "ok" });
    const start = okRuns(await scrapeGateway());
    const first = await inbound(sys, "parker", "hello");
    expect((await timedWait(sys, first.runId, 10_000)).result).toMatchObject({ status: "ok" });
    // Counted just after the finish the wait saw: the baseline is taken once it is.
    const before = await settle(
      async () => {
        const e = await scrapeGateway();
        return okRuns(e) >= start + 1 ? e : null;
      },
      { what: "the first turn counted" },
    );
    // Parks are counted from the stats hash itself: a scrape reuses its read of it for 500 ms, so a
    // park made just before the run finished could be missing from a scrape taken right after.
    const storageFaults = async () => Number((await sys.svc.redis.hget(sys.svc.keys.stats(), "storage_faults")) ?? 0);
    const faultsBefore = await storageFaults();
    // The sessions directory replaced by a file: the next turn's transcript write fails (ENOTDIR).
    const dir = join(storage, "agents", "main", "sessions");
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    const parked = await inbound(sys, "parker", "while away");
    await settle(async () => (await storageFaults()) - faultsBefore >= 2 || null, { what: "the turn parked twice" });
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    expect((await timedWait(sys, parked.runId, 15_000)).result).toMatchObject({ status: "ok" });
    const attempts = Number((await sys.get(`/v1/runs/${parked.runId}`)).body.attempts);
    expect(attempts).toBeGreaterThanOrEqual(3);
    const after = await scrapeGateway();
    // Every begin after the first followed a park (one storage fault each) or is a redelivery. On a
    // loaded machine a real redelivery may happen too (a lease lost to a stalled event loop): it
    // is counted on both sides. A park counted as a redelivery is not.
    const parks = (await storageFaults()) - faultsBefore;
    const redeliveries =
      valueOf(after, "switchboard_redeliveries_total") - valueOf(before, "switchboard_redeliveries_total");
    expect({ parks, redeliveries, attempts }).toEqual({ parks, redeliveries: attempts - 1 - parks, attempts });
    expect(parks).toBeGreaterThanOrEqual(2);
    expect(valueOf(after, "switchboard_runs_total", { status: "ok" })).toBe(
      valueOf(before, "switchboard_runs_total", { status: "ok" }) + 1,
    );
  }, 30_000);
});
