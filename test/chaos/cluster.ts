/**
 * The deployment the chaos suite breaks: a private redis-server with AOF, two `switchboard
 * gateway` processes (one waking idle sessions through the ready list, one with drain jobs) and
 * three `switchboard worker` processes, all real OS processes started
 * from a config file. The chaos actions are real crashes (SIGKILL, no cleanup), each followed by
 * a replacement, as an operator's supervisor would do.
 */
import { rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { Config } from "../../src/config/index.js";
import { spawnGateway, spawnWorker, type GatewayProcess } from "../fixtures/runs-support.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import type { ChildHandle } from "../helpers/system.js";
import type { Random } from "./random.js";

export interface ChaosCounters {
  workerKills: number;
  redisRestarts: number;
  gatewayKills: number;
}

/**
 * Gateway 0 wakes idle sessions through the ready list (the default), gateway 1 with drain jobs,
 * so both wake-ups (and a deployment mixing them) go through the same crashes.
 */
function gatewayConfig(config: Config, slot: number): Config {
  return slot === 1 ? { ...config, workers: { ...config.workers, wake: "drain-job" } } : config;
}

export class ChaosCluster {
  readonly counters: ChaosCounters = { workerKills: 0, redisRestarts: 0, gatewayKills: 0 };
  private readonly workers: ChildHandle[] = [];

  private constructor(
    readonly config: Config,
    readonly redis: PrivateRedis,
    readonly gateways: GatewayProcess[],
  ) {}

  /**
   * `makeConfig` gets the Redis URL and returns the deployment's config. AOF with
   * `appendfsync always`: Redis writes and fsyncs every write before it answers, so nothing it
   * acknowledged can be lost when it is killed -9. The suite asserts exactly that no
   * acknowledged message is lost; with `everysec` a write may be answered while the AOF write is
   * still postponed behind a slow fsync, and the last second could go.
   */
  static async start(makeConfig: (redisUrl: string) => Config, workerCount: number): Promise<ChaosCluster> {
    const redis = await startPrivateRedis({ appendonly: true, appendfsync: "always" });
    const config = makeConfig(redis.url);
    const gateways = await Promise.all([spawnGateway(config), spawnGateway(gatewayConfig(config, 1))]);
    const cluster = new ChaosCluster(config, redis, gateways);
    cluster.workers.push(...(await Promise.all(Array.from({ length: workerCount }, () => spawnWorker(config)))));
    return cluster;
  }

  get gatewayUrls(): string[] {
    return this.gateways.map((g) => g.url);
  }

  /** SIGKILL one worker process (chosen by `rnd`) and start a replacement. */
  async killWorker(rnd: Random): Promise<void> {
    const victim = this.workers.splice(rnd.int(0, this.workers.length - 1), 1)[0]!;
    await victim.kill9();
    this.counters.workerKills++;
    this.workers.push(await retrying(() => spawnWorker(this.config)));
  }

  /** SIGKILL the redis-server, leave it down for `downMs`, start it again (same port, same AOF dir). */
  async restartRedis(downMs: number): Promise<void> {
    await this.redis.kill9();
    this.counters.redisRestarts++;
    await sleep(downMs);
    await this.redis.start();
  }

  /** SIGKILL gateway `slot`, leave it down for `downMs`, start a new one on the same port. */
  async killGateway(slot: number, downMs: number): Promise<void> {
    const victim = this.gateways[slot]!;
    await victim.kill9();
    this.counters.gatewayKills++;
    await sleep(downMs);
    this.gateways[slot] = await retrying(() => spawnGateway(gatewayConfig(this.config, slot), victim.port));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.workers, ...this.gateways].map((p) => p.kill9()));
    await this.redis.cleanup();
    rmSync(this.config.storage.dir, { recursive: true, force: true });
  }
}

/** A replacement process may fail to start while Redis is away (it checks Redis first): try again. */
async function retrying<T>(start: () => Promise<T>, deadlineMs = 30_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await start();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(250);
    }
  }
}
