/**
 * Everything a Switchboard process talks to, built once from the config: the core services
 * (core-services.ts: the command connection, session store, transcripts, run records, dead
 * letters), then the run machinery and queues. Gateway, workers, CLI and tests all
 * start from here, so there is one place that decides how the pieces are wired.
 *
 * This is the composition root: the layers below declare the narrow dependencies they use
 * (RunDeps, ToolDeps, WorkerDeps, GatewayDeps, …) and never import this module; `Services`
 * extends them, so a piece missing here fails to compile here.
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { createQueues, closeQueues, createRedis, type Queues } from "../queues/index.js";
import { CancelBus, Inbox, PendingWakes, RunWaiter, SessionLeases, StorageFaults } from "../runs/index.js";
import type { DoctorDeps } from "../doctor/checks.js";
import type { GatewayDeps } from "../gateway/gateway-deps.js";
import type { WorkerDeps } from "../workers/worker-deps.js";
import { createCoreServices, quitConnections, type CoreServices, type ProcessRole } from "./core-services.js";

export interface Services extends CoreServices, GatewayDeps, WorkerDeps, DoctorDeps {
  leases: SessionLeases;
  inbox: Inbox;
  queues: Queues;
  cancels: CancelBus;
  storageFaults: StorageFaults;
  /** The process's one run-done subscriber (agent.wait, sessions_send), made on first use. */
  waiter(): RunWaiter;
  /** The run waiter if this process made one (a shutting-down gateway hands its waits over). */
  existingWaiter(): RunWaiter | undefined;
  /** A new dedicated connection (subscribers, BullMQ workers); closed by `close()`. */
  connection(role: "worker" | "subscriber", name?: string): RedisClient;
  /** Closes the queues, the run waiter and every connection. */
  close(): Promise<void>;
}

export function createServices(config: Config, opts: { role: ProcessRole; log?: Logger }): Services {
  const core = createCoreServices(config, opts);
  const { log, keys, redis, runs } = core;
  const cli = opts.role === "cli";
  const extra: RedisClient[] = [];
  let waiter: RunWaiter | undefined;
  const queueConn = createRedis(config.redis.url, cli ? "cli" : "producer", log);
  let lastQueueError = 0;
  const queues = createQueues(
    queueConn,
    keys,
    (queue, err) => {
      if (Date.now() - lastQueueError > 5000) {
        lastQueueError = Date.now();
        // A CLI command reports the cause in its own message; the retries are debug detail there.
        if (cli) log.debug({ queue, err: err.message }, "queue connection error (will retry)");
        else log.warn({ queue, err: err.message }, "queue connection error (will retry)");
      }
    },
    cli,
  );
  return {
    ...core,
    leases: new SessionLeases(redis, keys, config.workers.lockDurationMs),
    inbox: new Inbox(redis, keys, runs),
    wakes: new PendingWakes(redis, keys),
    queues,
    cancels: new CancelBus(redis, keys),
    storageFaults: new StorageFaults(redis, keys, log, config.storage.faultDeadlineMinutes * 60_000),
    // Lazy: a short CLI command that never waits must not open (and race closing) a subscriber.
    waiter() {
      return (waiter ??= new RunWaiter(this.connection("subscriber"), keys, this.runs));
    },
    existingWaiter() {
      return waiter;
    },
    connection(role, name) {
      const c = createRedis(config.redis.url, role, log, name);
      extra.push(c);
      return c;
    },
    async close() {
      await waiter?.close();
      await closeQueues(queues);
      await quitConnections([redis, queueConn, ...extra]);
    },
  };
}
