/**
 * The bench's Redis: a private redis-server (the same embedded one `switchboard start` runs:
 * AOF, appendfsync everysec), so command counts are ours alone, and plain clients for the
 * bench's own bookkeeping.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startEmbeddedRedis } from "../../src/app/embedded-redis.js";

export interface BenchRedis {
  url: string;
  stop(): Promise<void>;
}

export async function startBenchRedis(): Promise<BenchRedis> {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-redis-"));
  const redis = await startEmbeddedRedis(dir);
  return {
    url: redis.url,
    async stop() {
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A client whose errors after Redis stops at the end of the run are expected, not crashes. */
export function benchClient(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: () => null });
  r.on("error", () => {});
  return r;
}

/** Bytes Redis has read from its clients so far (INFO stats `total_net_input_bytes`). */
export async function netInputBytes(admin: Redis): Promise<number> {
  const m = /^total_net_input_bytes:(\d+)/m.exec(await admin.info("stats"));
  return m ? Number(m[1]) : Number.NaN;
}

/** Calls per command from INFO commandstats (commands run inside Lua scripts included). */
export async function commandStats(admin: Redis): Promise<Map<string, number>> {
  const info = await admin.info("commandstats");
  const out = new Map<string, number>();
  for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** Calls per command between two snapshots. */
export function statsDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const d = new Map<string, number>();
  for (const [k, v] of after) {
    const n = v - (before.get(k) ?? 0);
    if (n > 0) d.set(k, n);
  }
  return d;
}

/**
 * Total of a delta without the bench's own observation commands: `info` (the snapshots
 * themselves) and whatever the caller names (e.g. its probe reads, counted on its side).
 */
export function totalCommands(delta: Map<string, number>, minus: Map<string, number> = new Map()): number {
  let total = 0;
  for (const [k, v] of delta) if (k !== "info") total += v - (minus.get(k) ?? 0);
  return total;
}

/** "name 3.2, other 1.0, …": the largest entries of a per-unit breakdown. */
export function topEntries(counts: Map<string, number>, per: number, n = 10): string {
  return [...counts.entries()]
    .filter(([k]) => k !== "info")
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${(v / per).toFixed(1)}`)
    .join(", ");
}
