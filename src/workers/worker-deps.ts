/**
 * What the BullMQ processors and the worker host need from a process: the run machinery's
 * stores and queues, transcripts, and what only a worker uses (the logger, session leases,
 * storage-fault reports, dedicated connections). The tools reach a turn as an injected
 * ToolInvokerFactory, not through these. src/app builds it.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { RunDeps } from "../runs/run-deps.js";
import type { SessionLeases } from "../runs/session-lease.js";
import type { StorageFaults } from "../runs/storage-faults.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { TranscriptStore } from "../transcript/transcript-store.js";

export interface WorkerDeps extends RunDeps {
  config: Config;
  log: Logger;
  keys: RedisKeys;
  redis: RedisClient;
  transcripts: TranscriptStore;
  leases: SessionLeases;
  storageFaults: StorageFaults;
  /** A new dedicated connection (subscribers, BullMQ workers), closed with the process. */
  connection(role: "worker" | "subscriber", name?: string): RedisClient;
}
