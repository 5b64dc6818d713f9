import { loadCliConfig, connect, type GlobalOptions } from "../client.js";
import { ago, printJson } from "../output.js";
import { createServices } from "../../app/services.js";
import { QUEUE_NAMES } from "../../queues/queue-names.js";
import { readRuntimeInfo } from "../../app/runtime-file.js";
import { StorageFaults } from "../../runs/storage-faults.js";

/** `switchboard status`: gateway reachability, Redis, queue depths, worker count, recent sessions. */
export async function statusCommand(opts: GlobalOptions & { json?: boolean }): Promise<number> {
  const { config } = loadCliConfig(opts);
  const client = await connect(opts);
  const gateway = client.mode === "http" ? { url: client.describe, reachable: true } : { url: readRuntimeInfo(config.storage.dir)?.gatewayUrl ?? null, reachable: false };
  const svc = createServices(config, { role: "cli" });
  const out: Record<string, unknown> = { gateway, redis: { url: config.redis.url, prefix: config.redis.prefix } };
  try {
    const started = Date.now();
    await svc.redis.ping();
    (out.redis as Record<string, unknown>).up = true;
    (out.redis as Record<string, unknown>).pingMs = Date.now() - started;
    const queues: Record<string, unknown> = {};
    for (const name of QUEUE_NAMES) {
      const q = svc.queues[name];
      queues[name] = { ...(await q.getJobCounts("waiting", "active", "delayed", "failed", "completed")), workers: await q.getWorkersCount() };
    }
    out.queues = queues;
    out.workers = Math.max(...Object.values(queues).map((q) => (q as { workers: number }).workers));
    const fault = await StorageFaults.current(svc.redis, svc.keys);
    out.storage = fault ? { healthy: false, code: fault.code, message: fault.message, since: fault.since } : { healthy: true };
    out.deadLetters = await svc.deadLetters.count();
    out.sessions = (await svc.sessions.list({ limit: 5 })).map((s) => ({ key: s.key, updatedAt: s.updatedAt, ago: ago(s.updatedAt) }));
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
    process.stdout.write(`Gateway: ${gateway.reachable ? `up at ${gateway.url}` : "not reachable"}\n`);
    process.stdout.write(`Redis:   ${r.up ? `up (${r.url}, ${r.pingMs} ms)` : `DOWN (${r.url}: ${r.error})`}\n`);
    if (out.queues) {
      process.stdout.write(`Workers: ${out.workers}\nQueues:\n`);
      for (const [name, c] of Object.entries(out.queues as Record<string, Record<string, number>>)) {
        process.stdout.write(`  ${name.padEnd(12)} waiting ${c.waiting}  active ${c.active}  delayed ${c.delayed}  failed ${c.failed}  workers ${c.workers}\n`);
      }
      const st = out.storage as { healthy: boolean; code?: string; message?: string; since?: number };
      process.stdout.write(`Storage: ${st.healthy ? "ok" : `UNHEALTHY since ${new Date(st.since ?? 0).toISOString()} (${st.code}: ${st.message}); turns are parked`}\n`);
      const dl = out.deadLetters as number;
      process.stdout.write(`Dead letters: ${dl}${dl ? "  (switchboard deadletters to list and replay)" : ""}\n`);
      process.stdout.write("Recent sessions:\n");
      for (const s of out.sessions as { key: string; ago: string }[]) process.stdout.write(`  ${s.key}  (${s.ago})\n`);
    }
  }
  return (out.redis as { up: boolean }).up ? 0 : 1;
}
