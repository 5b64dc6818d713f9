/**
 * Real OS processes for the multi-process figures: `switchboard worker` from dist/ (what
 * operators run) and a bare BullMQ worker (bench/bare-worker.ts), with their resident memory
 * read from /proc.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const BARE_WORKER = fileURLToPath(new URL("../bare-worker.js", import.meta.url));

export interface ChildWorker {
  pid: number;
  /** When it said it was ready (ms since epoch). */
  readyAt: number;
  output(): string;
  stop(): Promise<void>;
}

/** This environment without the variables that would point a child at another deployment. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "warn" };
  for (const k of Object.keys(env)) if (k === "REDIS_URL" || k.startsWith("SWITCHBOARD_")) delete env[k];
  return env;
}

async function spawnUntilReady(args: string[], what: string, readyTimeoutMs = 60_000): Promise<ChildWorker> {
  const child: ChildProcess = spawn(process.execPath, args, {
    env: childEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + readyTimeoutMs;
  while (!/\bready\b/.test(out)) {
    if (child.exitCode !== null) throw new Error(`${what} exited early (${child.exitCode}):\n${out}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${what} not ready within ${readyTimeoutMs} ms:\n${out}`);
    }
    await sleep(20);
  }
  return {
    pid: child.pid!,
    readyAt: Date.now(),
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, sleep(15_000).then(() => child.kill("SIGKILL"))]);
      await exited;
    },
  };
}

/** `switchboard worker --config <file>`, as operators start one. */
export async function spawnSwitchboardWorker(configFile: string): Promise<ChildWorker> {
  return await spawnUntilReady([CLI, "worker", "--config", configFile], "switchboard worker");
}

/** A bare BullMQ Worker (no-op processor) in its own process. */
export async function spawnBareWorker(redisUrl: string, queue: string, concurrency: number): Promise<ChildWorker> {
  return await spawnUntilReady([BARE_WORKER, redisUrl, queue, String(concurrency)], "bare BullMQ worker");
}

/** A config object as a file a child process can load; `cleanup` removes it. */
export function writeConfigFile(config: unknown): { file: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-cfg-"));
  const file = join(dir, "switchboard.json5");
  writeFileSync(file, JSON.stringify(config, null, 2));
  return { file, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Resident set size of a process in MB (10^6 bytes; Linux /proc), undefined once it is gone. */
export function rssMB(pid: number): number | undefined {
  try {
    // /proc reports "kB" meaning KiB.
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? (Number(m[1]) * 1024) / 1e6 : undefined;
  } catch {
    return undefined;
  }
}

/** Samples a process's RSS every `everyMs` until stopped; reports the peak. */
export class RssSampler {
  private peak = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    everyMs = 50,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  private sample(): void {
    const v = rssMB(this.pid);
    if (v !== undefined && v > this.peak) this.peak = v;
  }

  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peak;
  }
}
