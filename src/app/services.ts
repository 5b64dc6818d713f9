/**
 * Everything a Switchboard process talks to, built once from the config: RedisClient clients by role,
 * the session store, transcripts, run machinery and queues. Gateway, workers, CLI and tests all
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
import {
  CancelBus,
  DeadLetters,
  Inbox,
  PendingWakes,
  RunRecords,
  RunWaiter,
  SessionLeases,
  StorageFaults,
} from "../runs/index.js";
import { runRecordTtlSeconds } from "../runs/run-records.js";
import { RedisKeys, SessionStore } from "../storage/index.js";
import { TranscriptStore } from "../transcript/index.js";
import type { DoctorDeps } from "../doctor/checks.js";
import type { GatewayDeps } from "../gateway/gateway-deps.js";
import type { WorkerDeps } from "../workers/worker-deps.js";
import { createLogger } from "./logger.js";

export interface Services extends GatewayDeps, WorkerDeps, DoctorDeps {
  config: Config;
  log: Logger;
  keys: RedisKeys;
  /** Commands (not blocking, not subscribed). */
  redis: RedisClient;
  sessions: SessionStore;
  transcripts: TranscriptStore;
  leases: SessionLeases;
  inbox: Inbox;
  runs: RunRecords;
  queues: Queues;
  cancels: CancelBus;
  deadLetters: DeadLetters;
  storageFaults: StorageFaults;
  /** The process's one run-done subscriber (agent.wait, sessions_send), made on first use. */
  waiter(): RunWaiter;
  /** The run waiter if this process made one (a shutting-down gateway hands its waits over). */
  existingWaiter(): RunWaiter | undefined;
  /** A new dedicated connection (subscribers, BullMQ workers); closed by `close()`. */
  connection(role: "worker" | "subscriber", name?: string): RedisClient;
  close(): Promise<void>;
}

export function createServices(
  config: Config,
  opts: { role: "gateway" | "worker" | "cli" | "all"; log?: Logger },
): Services {
  const log = opts.log ?? createLogger(`switchboard-${opts.role}`);
  const keys = new RedisKeys(config.redis.prefix);
  // A CLI command's connections give up on an unanswered command (queues/redis-connections.ts).
  const cli = opts.role === "cli";
  const redis = createRedis(config.redis.url, cli ? "cli" : opts.role === "gateway" ? "producer" : "worker", log);
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
  const runs = new RunRecords(redis, keys, runRecordTtlSeconds(config));
  return {
    config,
    log,
    keys,
    redis,
    sessions: new SessionStore(redis, config.redis.prefix),
    // Transcript keys come from the same layout: one hash tag with the session lease (the fence).
    transcripts: new TranscriptStore({ redis, keys, storageDir: config.storage.dir }),
    leases: new SessionLeases(redis, keys, config.workers.lockDurationMs),
    inbox: new Inbox(redis, keys, runs),
    wakes: new PendingWakes(redis, keys),
    runs,
    queues,
    cancels: new CancelBus(redis, keys),
    deadLetters: new DeadLetters(redis, keys),
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
      // QUIT only where Redis answers: on a connection never ready (Redis down or hung) it would
      // wait in the offline queue for a reply that does not come.
      await Promise.allSettled(
        [redis, queueConn, ...extra].map((c) =>
          c.status === "ready" ? c.quit().catch(() => c.disconnect()) : c.disconnect(),
        ),
      );
    },
  };
}
