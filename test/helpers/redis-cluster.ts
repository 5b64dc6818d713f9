/**
 * A private Redis Cluster for tests: N `redis-server --cluster-enabled yes` processes on free
 * ports (each with its own temp dir and cluster config file), joined by
 * `redis-cli --cluster create … --cluster-replicas 0`. Nothing is shared with other tests and
 * everything is killed and removed by `cleanup()`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";

export function hasRedisCli(): boolean {
  return spawnSync("redis-cli", ["--version"], { stdio: "ignore" }).status === 0;
}

async function canListen(port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await canListen(port)) && (await canListen(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
  throw new Error("no free port pair for a cluster node");
}

export interface ClusterNode {
  port: number;
  url: string;
  /** A plain (non-cluster) client to this node alone, for inspecting what it stores. */
  client(): Redis;
}

export interface PrivateCluster {
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…`: Switchboard's cluster URL. */
  url: string;
  /** In `--cluster create` order: the first holds slots 0-5460, the next 5461-10922, … */
  nodes: ClusterNode[];
  /** The node serving the slot of hash tag `{tag}`. */
  nodeForTag(tag: string): Promise<ClusterNode>;
  cleanup(): Promise<void>;
}

async function command(port: number, fn: (r: Redis) => Promise<string>): Promise<string> {
  const r = new Redis({
    port,
    host: "127.0.0.1",
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  r.on("error", () => {});
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

async function untilTrue(what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await fn().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const taken = new Set<number>();
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  const nodes: ClusterNode[] = [];
  const cleanup = async () => {
    await Promise.all(
      children.map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        const exited = new Promise<void>((r) => c.once("exit", () => r()));
        c.kill("SIGKILL");
        await exited;
      }),
    );
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = await freeClusterPort(taken);
      const dir = mkdtempSync(join(tmpdir(), "sb-cluster-"));
      dirs.push(dir);
      const child = spawn(
        "redis-server",
        [
          "--port",
          String(port),
          "--bind",
          "127.0.0.1",
          "--dir",
          dir,
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          join(dir, "nodes.conf"),
          "--cluster-node-timeout",
          "2000",
          "--save",
          "",
          "--appendonly",
          "no",
          "--maxmemory-policy",
          "noeviction",
          "--daemonize",
          "no",
          "--loglevel",
          "warning",
        ],
        { stdio: "ignore" },
      );
      children.push(child);
      const url = `redis://127.0.0.1:${port}`;
      nodes.push({ port, url, client: () => new Redis(url, { maxRetriesPerRequest: null }) });
    }
    for (const n of nodes)
      await untilTrue(
        `node ${n.port} did not answer PING`,
        async () => (await command(n.port, (r) => r.ping())) === "PONG",
        10_000,
      );

    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "0", "--cluster-yes"],
      { encoding: "utf8", timeout: 30_000 },
    );
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`);
    // Every node must see the whole slot map as served before clients connect.
    for (const n of nodes) {
      await untilTrue(
        `node ${n.port} did not reach cluster_state:ok`,
        async () => /cluster_state:ok/.test(await command(n.port, (r) => r.cluster("INFO"))),
        20_000,
      );
    }
  } catch (err) {
    await cleanup();
    throw err;
  }

  return {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}`,
    nodes,
    async nodeForTag(tag) {
      const slot = Number(await command(nodes[0]!.port, async (r) => String(await r.cluster("KEYSLOT", `{${tag}}`))));
      const ranges = (await command(nodes[0]!.port, async (r) => JSON.stringify(await r.cluster("SLOTS")))) as string;
      for (const [from, to, [, port]] of JSON.parse(ranges) as [number, number, [string, number]][]) {
        if (slot >= from && slot <= to) return nodes.find((n) => n.port === port)!;
      }
      throw new Error(`slot ${slot} of {${tag}} is not served`);
    },
    cleanup,
  };
}
