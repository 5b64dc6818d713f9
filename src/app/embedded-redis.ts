/**
 * The embedded default of `switchboard start`: when no Redis answers at the configured URL and
 * none was configured explicitly, start a private `redis-server` from PATH on a free port, with
 * AOF and its data under the state dir, so a newcomer needs nothing but Node and redis-server.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { openRedis } from "../queues/redis-connections.js";

/** One PING, no retries: true when Redis (or, for a cluster URL, a ready Redis Cluster) answers. */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  const r = openRedis(
    url,
    { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: timeoutMs },
    () => null,
    {
      lazyConnect: true,
      slotsRefreshTimeout: timeoutMs,
    },
  );
  r.on("error", () => {});
  try {
    await r.connect();
    return (await r.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === "object" && a ? a.port : 0));
    });
  });
}

export interface EmbeddedRedis {
  url: string;
  dataDir: string;
  stop(): Promise<void>;
}

export async function startEmbeddedRedis(stateDir: string): Promise<EmbeddedRedis> {
  const dataDir = join(stateDir, "redis");
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess;
  try {
    child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dataDir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction",
      ],
      { stdio: "ignore" },
    );
  } catch (err) {
    throw new Error(
      `cannot start redis-server (${(err as Error).message}); install it (apt-get install -y redis-server) ` +
        `or set REDIS_URL`,
    );
  }
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(
        new Error(
          `cannot start redis-server: ${err.message}; install it (apt-get install -y redis-server) or set REDIS_URL`,
        ),
      ),
    );
    child.once("exit", (code) => reject(new Error(`redis-server exited with code ${code}`)));
  });
  failed.catch(() => {});
  const deadline = Date.now() + 10_000;
  while (!(await Promise.race([redisAnswers(url, 500), failed]))) {
    if (Date.now() > deadline) throw new Error(`embedded redis-server did not answer on ${url}`);
    await sleep(50);
  }
  return {
    url,
    dataDir,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
    },
  };
}
