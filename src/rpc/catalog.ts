/**
 * What each gateway RPC method is for and what it takes: the source of `switchboard call --list`
 * and of the OpenAPI document (one path per method). Params are the very zod schemas the
 * methods validate with; a method missing here is still served and listed, without a
 * description (a unit test asks for one).
 */
import { z } from "zod";
import * as P from "./params.js";

export interface RpcMethodDoc {
  summary: string;
  params: z.ZodType;
}

/** `GET /v1/deliveries` reads the same filters; the method takes them as a body. */
const DeliveriesListParams = z.strictObject({
  sessionKey: z.string().optional(),
  channel: z.string().optional(),
  limit: z.number().int().min(1).optional(),
});

export const RPC_CATALOG: Record<string, RpcMethodDoc> = {
  "sessions.list": {
    summary:
      "List sessions, newest first or oldest first (filters: agent, kinds, label, search, activity); pages by cursor",
    params: P.SessionsListParams,
  },
  "sessions.resolve": { summary: "Find one session by key, sessionId or label", params: P.SessionsResolveParams },
  "sessions.patch": {
    summary: "Change a session's settings (label, sendPolicy, model override, ...)",
    params: P.SessionsPatchParams,
  },
  "sessions.reset": {
    summary: "Start a new transcript for a session (stops its running turn)",
    params: P.SessionsResetParams,
  },
  "sessions.cleanup": {
    summary: "Prune idle sessions and cap each agent (session.maintenance); dryRun reports only",
    params: P.SessionsCleanupParams,
  },
  "sessions.delete": {
    summary: "Delete a session (not the main one) and archive its transcript",
    params: P.SessionsDeleteParams,
  },
  "chat.history": {
    summary: "A session's transcript messages, oldest first (operators' unsanitised view)",
    params: P.ChatHistoryParams,
  },
  agent: {
    summary: "Queue a turn for a session; answers its runId at once (wait with agent.wait)",
    params: P.AgentParams,
  },
  "agent.wait": {
    summary: "Wait for a run to finish and get its reply (any gateway can answer)",
    params: P.AgentWaitParams,
  },
  send: { summary: "Send a message out through a channel (recorded in deliveries)", params: P.SendParams },
  "deadletters.list": {
    summary:
      "Messages whose turn was given up after its retries, oldest first (each message cut to 4000 characters); " +
      "with limit, one page and a nextCursor to pass as cursor",
    params: P.DeadLettersListParams,
  },
  "deadletters.get": { summary: "One dead letter, its message whole", params: P.DeadLetterRunParams },
  "deadletters.replay": {
    summary: "Queue a dead letter's turn again (one runId, or all: true)",
    params: P.DeadLettersReplayParams,
  },
  "deadletters.discard": { summary: "Drop a dead letter for good", params: P.DeadLetterRunParams },
  "deliveries.list": {
    summary: "Outbound deliveries, newest first (filter by session or channel)",
    params: DeliveriesListParams,
  },
  status: {
    summary:
      "The deployment this gateway serves: its Redis, queue depths, workers, ready list, storage, dead letters, " +
      "recent sessions, processes (what switchboard status prints)",
    params: P.StatusParams,
  },
};
