/**
 * What the session tools need from a process. Wider than the layers below (runs, rotation,
 * delivery, sub-agents), whose parts the tools hand on; narrower than the process's whole
 * wiring (no logger, leases or dedicated connections). src/app builds it.
 */
import type { Config } from "../config/schema.js";
import type { RunWaiter } from "../runs/run-waiter.js";
import type { RunDeps } from "../runs/run-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { TranscriptStore } from "../transcript/transcript-store.js";

export interface ToolDeps extends RunDeps {
  config: Config;
  keys: RedisKeys;
  redis: RedisClient;
  transcripts: TranscriptStore;
  /** The process's one run-done subscriber (sessions_send waits on it). */
  waiter(): RunWaiter;
}
