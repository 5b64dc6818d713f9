import { loadCliConfig, connect, reachable, type GlobalOptions } from "../client.js";
import { ago, formatTable, printJson } from "../output.js";
import { listProcesses } from "../../deployment/process-registry.js";
import { createServices } from "../../app/services.js";
import { QUEUE_NAMES } from "../../queues/queue-names.js";
import { readRuntimeInfo } from "../../app/runtime-file.js";
import { StorageFaults } from "../../runs/storage-faults.js";
import { displayRedisUrl } from "../../config/redis-url.js";

/** `switchboard status`: gateway reachability, Redis, queue depths, worker count, recent sessions. */
export async function statusCommand(opts: GlobalOptions & { json?: boolean }): Promise<number> {
  const { config } = loadCliConfig(opts);
  const client = await connect(opts);
  // An explicit --url / $SWITCHBOARD_URL gives an HTTP client without asking the gateway: probe it.
  const gateway =
    client.mode === "http"
      ? { url: client.describe, reachable: await reachable(client.describe) }
      : { url: readRuntimeInfo(config.storage.dir)?.gatewayUrl ?? null, reachable: false };
  const svc = createServices(config, { role: "cli" });
  const out: Record<string, unknown> = {
    gateway,
    redis: { url: displayRedisUrl(config.redis.url), prefix: config.redis.prefix },
  };
  try {
    const started = Date.now();
    await svc.redis.ping();
    (out.redis as Record<string, unknown>).up = true;
    (out.redis as Record<string, unknown>).pingMs = Date.now() - started;
    const queues: Record<string, unknown> = {};
    for (const name of QUEUE_NAMES) {
      const q = svc.queues[name];
      queues[name] = {
        ...(await q.getJobCounts("waiting", "active", "delayed", "failed", "completed")),
        workers: await q.getWorkersCount(),
      };
    }
    out.queues = queues;
    // The default wake-up is not a BullMQ job (docs/design/runs.md, "Wake-ups"): its backlog.
    out.ready = {
      sessions: await svc.redis.llen(svc.keys.readyList()),
      pendingWakes: await svc.redis.zcard(svc.keys.pendingWakes()),
    };
    out.workers = Math.max(...Object.values(queues).map((q) => (q as { workers: number }).workers));
    const fault = await StorageFaults.current(svc.redis, svc.keys);
    out.storage = fault
      ? { healthy: false, code: fault.code, message: fault.message, since: fault.since }
      : { healthy: true };
    out.deadLetters = await svc.deadLetters.count();
    out.sessions = (await svc.sessions.list({ limit: 5 })).map((s) => ({
      key: s.key,
      updatedAt: s.updatedAt,
      ago: ago(s.updatedAt),
    }));
    out.processes = (await listProcesses(svc.redis))
      .filter((p) => p.prefix === config.redis.prefix)
      .map((p) => ({
        role: p.role,
        host: p.host,
        pid: p.pid,
        version: p.version,
        startedAt: p.startedAt,
        heartbeatAt: p.heartbeatAt,
        ...(p.forced ? { forced: true } : {}),
      }));
  } catch (err) {
    (out.redis as Record<string, unknown>).up = false;
    (out.redis as Record<string, unknown>).error = (err as Error).message;
  } finally {
    await svc.close();
    await client.close();
  }
  if (opts.json) {
    printJson(out);
  } else {
    const r = out.redis as { url: string; up: boolean; pingMs?: number; error?: string };
    const at = gateway.url ? ` at ${gateway.url}` : "";
    const lines = [
      `Gateway: ${gateway.reachable ? `up${at}` : `not reachable${at}`}`,
      `Redis:   ${r.up ? `up (${r.url}, ${r.pingMs} ms)` : `DOWN (${r.url}: ${r.error})`}`,
    ];
    if (!r.up)
      lines.push(
        "         start Redis, or point REDIS_URL / redis.url (--config) at it; " +
          "`switchboard doctor` checks the whole setup",
      );
    if (out.queues) {
      const st = out.storage as { healthy: boolean; code?: string; message?: string; since?: number };
      const dl = out.deadLetters as number;
      const ready = out.ready as { sessions: number; pendingWakes: number };
      lines.push(
        `Workers: ${out.workers}`,
        `Ready:   ${ready.sessions} session${ready.sessions === 1 ? "" : "s"} waiting for a worker slot, ` +
          `${ready.pendingWakes} wake${ready.pendingWakes === 1 ? "" : "s"} pending`,
        st.healthy
          ? "Storage: ok"
          : `Storage: UNHEALTHY since ${new Date(st.since ?? 0).toISOString()} (${st.code}: ${st.message}); ` +
              "turns are parked",
        `Dead letters: ${dl}${dl ? "  (switchboard deadletters to list and replay)" : ""}`,
        "",
        formatTable(
          Object.entries(out.queues as Record<string, Record<string, number>>).map(([name, c]) => ({
            queue: name,
            ...c,
          })),
          ["queue", "waiting", "active", "delayed", "failed", "workers"],
        ),
      );
      const procs = out.processes as {
        role: string;
        host: string;
        pid: number;
        heartbeatAt: number;
        forced?: boolean;
      }[];
      if (procs.length) {
        lines.push(
          formatTable(
            procs.map((p) => ({
              process: p.role + (p.forced ? " (forced)" : ""),
              host: p.host,
              pid: p.pid,
              heartbeat: ago(p.heartbeatAt),
            })),
            ["process", "host", "pid", "heartbeat"],
          ),
        );
      }
      const sessions = out.sessions as { key: string; ago: string }[];
      lines.push(
        sessions.length
          ? formatTable(
              sessions.map((x) => ({ "recent session": x.key, updated: x.ago })),
              ["recent session", "updated"],
            )
          : "(no sessions yet)\n",
      );
    }
    process.stdout.write(lines.join("\n").replace(/\n*$/, "\n"));
  }
  return (out.redis as { up: boolean }).up ? 0 : 1;
}
