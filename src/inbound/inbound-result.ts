/** What `POST /v1/inbound` answers, and what handling a message needs (src/inbound/handle-inbound.ts). */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { RunDeps } from "../runs/run-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";

export interface InboundResult {
  ok: true;
  agentId: string;
  sessionKey: string;
  sessionId?: string;
  runId?: string;
  isNewSession?: boolean;
  resetReason?: string;
  blocked?: "send_policy_deny";
  command?: "send" | "status" | "stop" | "tools";
  sendPolicy?: "allow" | "deny" | "inherit";
  stopped?: number;
  status?: string;
  duplicate?: boolean;
  /** An owner-only command from someone who is not an owner: nothing was changed. */
  refused?: "not_owner";
}

export interface InboundDeps extends RunDeps {
  config: Config;
  log: Logger;
  keys: RedisKeys;
  redis: RedisClient;
}
