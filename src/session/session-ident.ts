import { defaultAgentId } from "../config/agents.js";
import type { Config } from "../config/schema.js";
import { agentIdFromSessionKey } from "./key-parse.js";
import { sessionKindFromKey } from "./key-classify.js";
import type { SessionKind } from "./session-entry.js";

/** Which indexes a session key lives in: fixed by the key itself. */
export function identOf(config: Config, sessionKey: string): { agentId: string; kind: SessionKind } {
  return {
    agentId: agentIdFromSessionKey(sessionKey, defaultAgentId(config)),
    kind: sessionKindFromKey(config, sessionKey),
  };
}
