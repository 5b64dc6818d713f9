/** Prometheus text: BullMQ's per-queue job counts plus a few Switchboard gauges. */
import type { Services } from "../app/services.js";
import { StorageFaults } from "../runs/storage-faults.js";

export async function renderMetrics(svc: Services): Promise<string> {
  const parts: string[] = [];
  for (const q of Object.values(svc.queues)) parts.push(await q.exportPrometheusMetrics({ deployment: svc.config.redis.prefix }));
  const sessions = await svc.sessions.count();
  const workers = await svc.queues.runs.getWorkersCount();
  parts.push(
    "# HELP switchboard_sessions Sessions in the index",
    "# TYPE switchboard_sessions gauge",
    `switchboard_sessions{deployment="${svc.config.redis.prefix}"} ${sessions}`,
    "# HELP switchboard_run_workers Workers connected to the runs queue",
    "# TYPE switchboard_run_workers gauge",
    `switchboard_run_workers{deployment="${svc.config.redis.prefix}"} ${workers}`,
  );
  const [stats, deadLetters, fault] = await Promise.all([
    svc.redis.hgetall(svc.keys.stats()),
    svc.deadLetters.count(),
    StorageFaults.current(svc.redis, svc.keys),
  ]);
  const d = `deployment="${svc.config.redis.prefix}"`;
  parts.push(
    "# HELP switchboard_storage_healthy 0 while workers report transcript storage refusing writes",
    "# TYPE switchboard_storage_healthy gauge",
    `switchboard_storage_healthy{${d}} ${fault ? 0 : 1}`,
    "# HELP switchboard_storage_faults_total Turn attempts parked on a storage fault",
    "# TYPE switchboard_storage_faults_total counter",
    `switchboard_storage_faults_total{${d}} ${Number(stats.storage_faults ?? 0)}`,
    "# HELP switchboard_runs_given_up_total Turns given up and dead-lettered, by reason",
    "# TYPE switchboard_runs_given_up_total counter",
    `switchboard_runs_given_up_total{${d},reason="storage_deadline"} ${Number(stats.runs_storage_deadline ?? 0)}`,
    `switchboard_runs_given_up_total{${d},reason="poisoned"} ${Number(stats.runs_poisoned ?? 0)}`,
    "# HELP switchboard_dead_letters Messages waiting in the dead-letter list",
    "# TYPE switchboard_dead_letters gauge",
    `switchboard_dead_letters{${d}} ${deadLetters}`,
  );
  return parts.join("\n") + "\n";
}
