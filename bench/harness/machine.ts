/** Facts about the machine a run was measured on, for BENCHMARKS.md. */
import { cpus, loadavg, totalmem, platform, release } from "node:os";
import type { Redis } from "ioredis";

export interface MachineFacts {
  cores: number;
  cpuModel: string;
  memGiB: number;
  platform: string;
  node: string;
  redisVersion: string;
}

export async function machineFacts(admin: Redis): Promise<MachineFacts> {
  const info = await admin.info("server");
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? "unknown CPU",
    memGiB: totalmem() / 2 ** 30,
    platform: `${platform()} ${release()}`,
    node: process.version,
    redisVersion: /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown",
  };
}

export function load1(): number {
  return loadavg()[0] ?? 0;
}
