/**
 * Benchmark: Switchboard turns against bare BullMQ jobs, in the same run, on the same Redis.
 * Figures are reported as ratios to bare BullMQ, which makes them comparable across machines.
 *
 *   npm run bench -- [--jobs 2000] [--sessions 100] [--concurrency 16]
 *
 * Bare BullMQ: add N jobs (concurrently), a Worker with the same concurrency completes them
 * with a no-op processor. Switchboard: N turns (echo runtime) spread over S sessions through
 * the real enqueue path (inbox + dedup'd drain), the real worker host (lease, fenced record
 * writes, JSONL transcript appends with fsync). Reported: throughput, p50/p95 latency from
 * enqueue to finished, Redis commands per unit (INFO commandstats delta) and Redis memory.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue, Worker, QueueEvents } from "bullmq";
import { Redis } from "ioredis";
import { parseConfig } from "../src/config/index.js";
import { startSystem } from "../src/app/system.js";
import { enqueueTurn } from "../src/runs/enqueue.js";
import { isTerminal } from "../src/runs/turn.js";
import { startEmbeddedRedis } from "../src/app/embedded-redis.js";

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}

const N = arg("jobs", 2000);
const SESSIONS = arg("sessions", 100);
const CONCURRENCY = arg("concurrency", 16);

/** A client whose errors after Redis stops at the end of the run are expected, not crashes. */
function client(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: () => null });
  r.on("error", () => {});
  return r;
}

async function commandCount(r: Redis): Promise<number> {
  const info = await r.info("commandstats");
  let total = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}
async function commandBreakdown(r: Redis): Promise<Map<string, number>> {
  const info = await r.info("commandstats");
  const out = new Map<string, number>();
  for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) out.set(m[1]!, Number(m[2]));
  return out;
}
function topDelta(a: Map<string, number>, b: Map<string, number>, n: number, per: number): string {
  return [...b.entries()]
    .map(([k, v]) => [k, (v - (a.get(k) ?? 0)) / per] as const)
    .filter(([, v]) => v > 0)
    .sort((x, y) => y[1] - x[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(", ");
}
async function usedMemory(r: Redis): Promise<number> {
  const info = await r.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

interface Result {
  perSec: number;
  p50: number;
  p95: number;
  cmdsPerUnit: number;
  memPerUnitBytes: number;
}

async function bareBullmq(url: string, admin: Redis): Promise<Result> {
  const connection = client(url);
  const name = `bench-${randomUUID().slice(0, 8)}`;
  const queue = new Queue(name, { connection });
  const events = new QueueEvents(name, { connection: client(url) });
  await events.waitUntilReady();
  const added = new Map<string, number>();
  const latencies: number[] = [];
  let done = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  events.on("completed", ({ jobId }) => {
    const t = added.get(jobId);
    if (t !== undefined) latencies.push(Date.now() - t);
    if (++done === N) resolveAll();
  });
  const mem0 = await usedMemory(admin);
  const c0 = await commandCount(admin);
  const worker = new Worker(name, async () => "ok", { connection: client(url), concurrency: CONCURRENCY });
  const started = Date.now();
  await Promise.all(
    Array.from({ length: N }, async (_, i) => {
      const t = Date.now();
      const job = await queue.add("job", { i, session: `s${i % SESSIONS}` });
      added.set(job.id!, t);
    }),
  );
  await all;
  const elapsed = Date.now() - started;
  const cmds = (await commandCount(admin)) - c0;
  const mem = (await usedMemory(admin)) - mem0;
  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
  return { perSec: (N / elapsed) * 1000, p50: pct(latencies, 50), p95: pct(latencies, 95), cmdsPerUnit: cmds / N, memPerUnitBytes: mem / N };
}

async function switchboardTurns(url: string, admin: Redis): Promise<Result & { transcriptsOk: boolean }> {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-"));
  const config = parseConfig({ redis: { url, prefix: `bench${randomUUID().slice(0, 6)}` }, storage: { dir }, workers: { concurrency: CONCURRENCY }, gateway: { port: 0 } });
  const sys = await startSystem(config, { gateway: false, workers: {} });
  const svc = sys.svc;
  const sessions = await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      const key = `agent:main:bench-${i}`;
      const e = await svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
      return e;
    }),
  );
  const latencies: number[] = [];
  const sub = client(url);
  let finished = 0;
  let resolveAll!: () => void;
  const allDone = new Promise<void>((r) => (resolveAll = r));
  sub.on("message", () => {
    if (++finished === N) resolveAll();
  });
  await sub.subscribe(svc.keys.runDoneChannel());
  const mem0 = await usedMemory(admin);
  const c0 = await commandCount(admin);
  const b0 = await commandBreakdown(admin);
  const started = Date.now();
  const runIds: { runId: string; t: number }[] = [];
  await Promise.all(
    Array.from({ length: N }, async (_, i) => {
      const s = sessions[i % SESSIONS]!;
      const t = Date.now();
      const turn = await enqueueTurn(svc, { sessionKey: s.key, agentId: "main", sessionId: s.sessionId, text: `m${i}`, step: "turn", provenance: "user" });
      runIds.push({ runId: turn.runId, t });
    }),
  );
  // Completion is observed as agent.wait does: the run-done notification, then one record read.
  await allDone;
  for (const r of runIds) {
    const rec = await svc.runs.get(r.runId);
    if (rec && isTerminal(rec.status)) latencies.push((rec.endedAt ?? Date.now()) - r.t);
  }
  const elapsed = Date.now() - started;
  const cmds = (await commandCount(admin)) - c0;
  const mem = (await usedMemory(admin)) - mem0;
  process.stderr.write(`Switchboard commands per turn: ${topDelta(b0, await commandBreakdown(admin), 12, N)}\n`);
  const sample = await svc.transcripts.messages("main", sessions[0]!.sessionId, 10_000);
  const transcriptsOk = sample.length === (Math.ceil(N / SESSIONS) * 2);
  sub.disconnect();
  await sys.close();
  rmSync(dir, { recursive: true, force: true });
  return { perSec: (N / elapsed) * 1000, p50: pct(latencies, 50), p95: pct(latencies, 95), cmdsPerUnit: cmds / N, memPerUnitBytes: mem / N, transcriptsOk };
}

async function main(): Promise<void> {
  // A private Redis so the command counts are ours alone.
  const redis = await startEmbeddedRedis(mkdtempSync(join(tmpdir(), "sb-bench-redis-")));
  const admin = client(redis.url);
  try {
    process.stderr.write(`bench: ${N} units, ${SESSIONS} sessions, concurrency ${CONCURRENCY}\n`);
    const bare = await bareBullmq(redis.url, admin);
    process.stderr.write(`bare BullMQ done\n`);
    const sb = await switchboardTurns(redis.url, admin);
    const row = (label: string, r: Result) =>
      `${label.padEnd(22)} ${r.perSec.toFixed(0).padStart(7)}/s  p50 ${String(r.p50).padStart(5)} ms  p95 ${String(r.p95).padStart(5)} ms  ${r.cmdsPerUnit.toFixed(1).padStart(6)} cmds/unit  ${(r.memPerUnitBytes / 1024).toFixed(2).padStart(7)} KiB/unit`;
    console.log(row("bare BullMQ job", bare));
    console.log(row("Switchboard turn", sb));
    console.log(
      `ratios (Switchboard / bare): throughput ${(sb.perSec / bare.perSec).toFixed(2)}x, p50 ${(sb.p50 / Math.max(1, bare.p50)).toFixed(2)}x, ` +
        `Redis commands ${(sb.cmdsPerUnit / bare.cmdsPerUnit).toFixed(2)}x, Redis memory ${(sb.memPerUnitBytes / Math.max(1, bare.memPerUnitBytes)).toFixed(2)}x`,
    );
    console.log(`transcripts complete: ${sb.transcriptsOk ? "yes" : "NO"}`);
  } finally {
    admin.disconnect();
    await redis.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
