/**
 * The services that read and write Redis and the transcripts without BullMQ: the session store,
 * transcripts, run records and dead letters on one command connection. `createServices` builds
 * the queues and the run machinery on top of these; the CLI's read-only commands (`sessions`,
 * `history`, `deadletters list`, `call` of a read method) use them alone, so they start without
 * loading BullMQ (README, "Processes").
 *
 * Every import here is of a module that does not load BullMQ, directly or through an index;
 * test/e2e/cli.test.ts checks that a read-only command never loads it.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { createRedis } from "../queues/redis-connections.js";
import { DeadLetters } from "../runs/dead-letters.js";
import { RunRecords, runRecordTtlSeconds } from "../runs/run-records.js";
import type { RedisClient } from "../storage/redis-client.js";
import { RedisKeys } from "../storage/redis-keys.js";
import { SessionStore } from "../storage/session-store.js";
import { TranscriptStore } from "../transcript/transcript-store.js";
import { createLogger } from "./logger.js";

export type ProcessRole = "gateway" | "worker" | "cli" | "all";

export interface CoreServices {
  config: Config;
  log: Logger;
  keys: RedisKeys;
  /** Commands (not blocking, not subscribed). */
  redis: RedisClient;
  sessions: SessionStore;
  transcripts: TranscriptStore;
  runs: RunRecords;
  deadLetters: DeadLetters;
  /** Closes the command connection. */
  close(): Promise<void>;
}

export function createCoreServices(config: Config, opts: { role: ProcessRole; log?: Logger }): CoreServices {
  const log = opts.log ?? createLogger(`switchboard-${opts.role}`);
  const keys = new RedisKeys(config.redis.prefix);
  // A CLI command's connections give up on an unanswered command (queues/redis-connections.ts).
  const role = opts.role === "cli" ? "cli" : opts.role === "gateway" ? "producer" : "worker";
  const redis = createRedis(config.redis.url, role, log);
  return {
    config,
    log,
    keys,
    redis,
    sessions: new SessionStore(redis, config.redis.prefix),
    // Transcript keys come from the same layout: one hash tag with the session lease (the fence).
    transcripts: new TranscriptStore({ redis, keys, storageDir: config.storage.dir }),
    runs: new RunRecords(redis, keys, runRecordTtlSeconds(config)),
    deadLetters: new DeadLetters(redis, keys),
    close: () => quitConnections([redis]),
  };
}

/**
 * QUIT each connection where Redis answers; on a connection never ready (Redis down or hung) a
 * QUIT would wait in the offline queue for a reply that does not come, so it is dropped instead.
 */
export async function quitConnections(connections: RedisClient[]): Promise<void> {
  await Promise.allSettled(
    connections.map((c) => (c.status === "ready" ? c.quit().catch(() => c.disconnect()) : c.disconnect())),
  );
}
