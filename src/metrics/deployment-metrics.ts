/**
 * Deployment-wide metrics, read from Redis at scrape time: queue job counts (the same series
 * BullMQ's own exporter writes), sessions, connected run workers, storage health, and the
 * counters every worker adds to in the stats hash (storage faults, turns given up). Any gateway
 * answers the same numbers, so they belong to no process and are not summed across gateways.
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { DeadLetters } from "../runs/dead-letters.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { SessionStore } from "../storage/session-store.js";
import { StorageFaults } from "../runs/storage-faults.js";

/** What the deployment-wide gauges read at scrape time. */
export interface DeploymentMetricsDeps {
  config: Config;
  redis: RedisClient;
  keys: RedisKeys;
  sessions: SessionStore;
  queues: Queues;
  deadLetters: DeadLetters;
}

export function createDeploymentRegistry(svc: DeploymentMetricsDeps): Registry {
  const registry = new Registry();
  const registers = [registry];
  const deployment = svc.config.redis.prefix;
  const queues = Object.values(svc.queues);
  // One read of the stats hash per scrape, shared by the gauges that use it.
  let statsRead: { at: number; value: Promise<Record<string, string>> } | undefined;
  const stats = () => {
    if (!statsRead || Date.now() - statsRead.at > 500)
      statsRead = { at: Date.now(), value: svc.redis.hgetall(svc.keys.stats()) };
    return statsRead.value;
  };

  new Gauge({
    name: "bullmq_job_count",
    help: "Number of jobs in the queue by state",
    labelNames: ["queue", "state", "deployment"],
    registers,
    async collect() {
      this.reset();
      const all = await Promise.all(queues.map(async (q) => [q.name, await q.getJobCounts()] as const));
      for (const [queue, counts] of all)
        for (const [state, n] of Object.entries(counts)) this.set({ queue, state, deployment }, n);
    },
  });
  for (const [name, which] of [
    ["bullmq_job_completed_total", "completed"],
    ["bullmq_job_failed_total", "failed"],
  ] as const) {
    new Counter({
      name,
      help: `Total number of ${which} jobs`,
      labelNames: ["queue", "deployment"],
      registers,
      async collect() {
        this.reset();
        const all = await Promise.all(
          queues.map(async (q) => [q.name, (await q.getMetrics(which)).meta.count] as const),
        );
        for (const [queue, n] of all) this.inc({ queue, deployment }, n);
      },
    });
  }
  new Gauge({
    name: "switchboard_sessions",
    help: "Sessions in the index",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, await svc.sessions.count());
    },
  });
  new Gauge({
    name: "switchboard_run_workers",
    help: "Workers connected to the runs queue",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, await svc.queues.runs.getWorkersCount());
    },
  });
  // Drains woken from the ready list are not BullMQ jobs: these show that wake-up path.
  new Gauge({
    name: "switchboard_ready_sessions",
    help: "Sessions on the ready list: readied by a push, waiting for a worker's free slot",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, await svc.redis.llen(svc.keys.readyList()));
    },
  });
  new Gauge({
    name: "switchboard_pending_wakes",
    help: "Wake-ups not yet seen through: sessions waiting for a drainer, or being drained from the ready list",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, await svc.redis.zcard(svc.keys.pendingWakes()));
    },
  });
  new Gauge({
    name: "switchboard_storage_healthy",
    help: "0 while workers report transcript storage refusing writes",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, (await StorageFaults.current(svc.redis, svc.keys)) ? 0 : 1);
    },
  });
  new Counter({
    name: "switchboard_storage_faults_total",
    help: "Turn attempts parked on a storage fault (all workers)",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.reset();
      this.inc({ deployment }, Number((await stats()).storage_faults ?? 0));
    },
  });
  new Counter({
    name: "switchboard_runs_given_up_total",
    help: "Turns given up and dead-lettered, by reason (all workers)",
    labelNames: ["deployment", "reason"],
    registers,
    async collect() {
      this.reset();
      const s = await stats();
      this.inc({ deployment, reason: "storage_deadline" }, Number(s.runs_storage_deadline ?? 0));
      this.inc({ deployment, reason: "poisoned" }, Number(s.runs_poisoned ?? 0));
    },
  });
  new Gauge({
    name: "switchboard_dead_letters",
    help: "Messages waiting in the dead-letter list",
    labelNames: ["deployment"],
    registers,
    async collect() {
      this.set({ deployment }, await svc.deadLetters.count());
    },
  });
  return registry;
}
