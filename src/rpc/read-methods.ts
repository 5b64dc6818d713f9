/**
 * The RPC methods that only read (sessions, history, dead letters, deliveries). They need the
 * core services alone (no queues), never BullMQ, so the CLI's read-only commands
 * run them against Redis directly without loading the queues; the gateway serves them with the
 * rest (methods.ts).
 */
import type { z } from "zod";
import type { Config } from "../config/schema.js";
import type { DeadLetters } from "../runs/dead-letters.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { SessionStore } from "../storage/session-store.js";
import type { TranscriptStore } from "../transcript/transcript-store.js";
import { defaultAgentId } from "../config/agents.js";
import { zodIssues } from "../config/parse.js";
import { DeliveryLog } from "../delivery/delivery-log.js";
import { SessionNotFoundError, SwitchboardError, ValidationError } from "../errors/index.js";
import { capChatHistory } from "../history/sanitize-history.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { topicOpt } from "../session/transcript-topic.js";
import * as P from "./params.js";

export type RpcHandler = (params: unknown) => Promise<unknown>;

export function parseParams<T extends z.ZodType>(schema: T, params: unknown, method: string): z.output<T> {
  const r = schema.safeParse(params ?? {});
  if (!r.success) throw ValidationError.fromIssues(`invalid params for ${method}`, zodIssues(r.error));
  return r.data;
}

/** chat.history bounds (OpenClaw's): default 200 messages, at most 1000. */
export const CHAT_HISTORY_DEFAULT = 200;

/** What the read methods use: no queues, no run machinery. */
export interface ReadRpcDeps {
  config: Config;
  keys: RedisKeys;
  redis: RedisClient;
  sessions: SessionStore;
  transcripts: TranscriptStore;
  deadLetters: DeadLetters;
}

/** The read methods by name, for a caller that must know whether a method only reads. */
export const READ_RPC_METHODS = [
  "sessions.list",
  "sessions.resolve",
  "chat.history",
  "deadletters.list",
  "deadletters.get",
  "deliveries.list",
] as const;

export function createReadRpcMethods(svc: ReadRpcDeps): Record<(typeof READ_RPC_METHODS)[number], RpcHandler> {
  const canon = (key: string, agentId?: string) => canonicalSessionKey(svc.config, key, agentId ? { agentId } : {});
  const deliveries = new DeliveryLog(svc.redis, svc.keys);
  const methods: Record<(typeof READ_RPC_METHODS)[number], RpcHandler> = {
    "sessions.list": async (raw) => {
      const p = parseParams(P.SessionsListParams, raw, "sessions.list");
      const query = {
        ...(p.limit ? { limit: p.limit } : {}),
        ...(p.activeMinutes ? { activeMinutes: p.activeMinutes } : {}),
        ...(p.agentId ? { agentId: p.agentId } : {}),
        ...(p.kinds ? { kinds: p.kinds } : {}),
        ...(p.label ? { label: p.label } : {}),
        ...(p.search ? { search: p.search } : {}),
        ...(p.spawnedBy ? { spawnedBy: canon(p.spawnedBy) } : {}),
        includeReserved: Boolean(p.includeGlobal || p.includeUnknown),
      };
      const shown = (r: { key: string }) =>
        (r.key !== "global" || p.includeGlobal) && (r.key !== "unknown" || p.includeUnknown);
      // By position (order/cursor): stable under concurrent updates, O(limit) per page.
      if (p.order !== undefined || p.cursor !== undefined) {
        if (p.offset !== undefined) throw new ValidationError("offset does not combine with order or cursor");
        const page = await svc.sessions.page({
          ...query,
          ...(p.order ? { order: p.order } : {}),
          ...(p.cursor ? { cursor: p.cursor } : {}),
        });
        const sessions = page.sessions.filter(shown);
        return {
          ts: Date.now(),
          count: sessions.length,
          sessions,
          ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
        };
      }
      const rows = await svc.sessions.list({ ...query, ...(p.offset ? { offset: p.offset } : {}) });
      const sessions = rows.filter(shown);
      // A full page may have more behind it: tell the caller where the next one starts.
      const full = rows.length === (p.limit ?? 1000);
      return {
        ts: Date.now(),
        count: sessions.length,
        sessions,
        ...(full ? { nextOffset: (p.offset ?? 0) + rows.length } : {}),
      };
    },

    "sessions.resolve": async (raw) => {
      const p = parseParams(P.SessionsResolveParams, raw, "sessions.resolve");
      let key: string | null = null;
      if (p.key !== undefined) key = canon(p.key, p.agentId);
      else if (p.sessionId !== undefined) key = await svc.sessions.keyForSessionId(p.sessionId);
      else if (p.label !== undefined)
        key = await svc.sessions.keyForLabel(p.agentId ?? defaultAgentId(svc.config), p.label);
      const entry = key ? await svc.sessions.get(key) : null;
      if (!entry || (p.spawnedBy && entry.spawnedBy !== canon(p.spawnedBy))) {
        if (p.label !== undefined) throw SessionNotFoundError.forLabel(p.label);
        throw new SessionNotFoundError(`${p.key ?? p.sessionId}`);
      }
      return { key: entry.key, entry };
    },

    "chat.history": async (raw) => {
      const p = parseParams(P.ChatHistoryParams, raw, "chat.history");
      const key = canon(p.sessionKey);
      const entry = await svc.sessions.get(key);
      if (!entry) return { sessionKey: key, messages: [] };
      const stored = await svc.transcripts.messages(
        entry.agentId,
        entry.sessionId,
        p.limit ?? CHAT_HISTORY_DEFAULT,
        topicOpt(entry.key),
      );
      // OpenClaw's bounds (128 KB per message, 6 MB per answer): a session of big tool outputs would
      // otherwise answer hundreds of MB, or fail at V8's string limit.
      const messages = capChatHistory(stored);
      return { sessionKey: key, sessionId: entry.sessionId, messages };
    },

    "deadletters.list": async (raw) => {
      const p = parseParams(P.DeadLettersListParams, raw, "deadletters.list");
      const page = await svc.deadLetters.page(p);
      // `count`: every dead letter there is, also when this is one page of them.
      return {
        count: p.limit === undefined ? page.letters.length : page.total,
        deadLetters: page.letters,
        ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
      };
    },

    "deadletters.get": async (raw) => {
      const p = parseParams(P.DeadLetterRunParams, raw, "deadletters.get");
      const letter = await svc.deadLetters.get(p.runId);
      if (!letter) throw new SwitchboardError("not_found", `No dead letter for run ${p.runId}`);
      return letter;
    },

    "deliveries.list": async (raw) => {
      const q = parseParams(P.DeliveriesListParams, raw, "deliveries.list");
      // A key as callers write it (`main`, any case) names the session it names everywhere else;
      // `channel:<ch>` is what a `send` with no session is recorded under, and is kept as it is.
      const sessionKey = q.sessionKey?.startsWith("channel:") ? q.sessionKey : q.sessionKey && canon(q.sessionKey);
      // Bounded as chat.history is (src/delivery/delivery-log.ts): `truncated` when records were left out.
      const page = await deliveries.listBounded(sessionKey ? { ...q, sessionKey } : q);
      return { deliveries: page.records, ...(page.more ? { truncated: true } : {}) };
    },
  };
  // No prototype, as the whole table (methods.ts): a name like `toString` is no method.
  return Object.assign(Object.create(null) as typeof methods, methods);
}
