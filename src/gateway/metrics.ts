/** Prometheus text: BullMQ's per-queue job counts plus a few Switchboard gauges. */
import type { Services } from "../app/services.js";

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
  return parts.join("\n") + "\n";
}
