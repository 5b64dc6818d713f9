/**
 * Real Redis for tests, never a mock. Order: $REDIS_URL, else a private `redis-server` from
 * PATH on a free port (its own temp dir, nothing persisted unless asked), else a testcontainers
 * container when a Docker engine answers. Tests that stop or restart Redis always use a private
 * server so the machine's shared Redis on 6379 is never touched.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";

export async function freePort(): Promise<number> {
  return await new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

export function hasRedisServerBinary(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

export interface PrivateRedis {
  url: string;
  port: number;
  dir: string;
  /** SIGKILL-free stop: SIGTERM (Redis flushes its AOF and exits), then wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL: a crash, no flush. Only writes already in the AOF survive (see `appendfsync`). */
  kill9(): Promise<void>;
  /** Start again on the same port and dir (AOF, if enabled, is replayed). */
  start(): Promise<void>;
  cleanup(): Promise<void>;
}

async function waitForPing(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    r.on("error", () => {});
    try {
      await r.connect();
      if ((await r.ping()) === "PONG") return;
    } catch {
      // not up yet
    } finally {
      r.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis at ${url} did not answer within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export interface PrivateRedisOptions {
  appendonly?: boolean;
  /**
   * `always` writes and fsyncs the AOF before Redis answers, so every acknowledged write
   * survives a crash of the server; `everysec` (the default) may lose the last second or so.
   */
  appendfsync?: "always" | "everysec";
  port?: number;
}

export async function startPrivateRedis(opts: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = opts.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), "sb-redis-"));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    opts.appendonly ? "yes" : "no",
    "--appendfsync",
    opts.appendfsync ?? "everysec",
    "--maxmemory-policy",
    "noeviction",
    "--daemonize",
    "no",
    "--loglevel",
    "warning",
  ];
  const handle: PrivateRedis = {
    url,
    port,
    dir,
    async start() {
      child = spawn("redis-server", args, { stdio: "ignore" });
      await waitForPing(url, 10_000);
    },
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((r) => c.once("exit", () => r()));
      c.kill("SIGTERM");
      await Promise.race([exited, sleep(5000).then(() => c.kill("SIGKILL"))]);
      await exited;
    },
    async kill9() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((r) => c.once("exit", () => r()));
      c.kill("SIGKILL");
      await exited;
    },
    async cleanup() {
      await handle.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await handle.start();
  return handle;
}

/** The shared test Redis URL for a whole run (used by the vitest global setup). */
export async function acquireTestRedis(): Promise<{ url: string; release: () => Promise<void> }> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, release: async () => {} };
  if (hasRedisServerBinary()) {
    const r = await startPrivateRedis();
    return { url: r.url, release: () => r.cleanup() };
  }
  try {
    const { RedisContainer } = await import("@testcontainers/redis");
    const c = await new RedisContainer("redis:7.2").start();
    return { url: c.getConnectionUrl(), release: async () => void (await c.stop()) };
  } catch (err) {
    throw new Error(
      "No Redis for tests: set REDIS_URL, install redis-server (apt-get install -y redis-server), " +
        `or run a Docker engine for testcontainers. (${(err as Error).message})`,
    );
  }
}
