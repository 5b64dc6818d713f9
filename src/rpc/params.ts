/**
 * zod schemas of the gateway RPC params (README "HTTP API"): validation and types in one place.
 * Keys, ids, labels and route fields refuse control, bidi and invisible characters
 * (session/unsafe-chars.ts) here, so a bad one is a 400 naming the character.
 */
import { z } from "zod";
import { safeString, wholeNumberId } from "../session/safe-text-schema.js";
import { SessionPatchSchema } from "../session/session-entry.js";
import { MAX_MESSAGE_BYTES } from "../text/message-size.js";

const key = safeString("session key").min(1).max(512);
const agentId = safeString("agentId").max(64);
const label = safeString("label", "label").max(512);
/** Route fields: a channel id, a peer, an account or a thread, all parts of keys and routes. */
const routeId = (what: string) => safeString(what).max(512);
const kinds = z.array(z.enum(["main", "group", "cron", "hook", "node", "other"]));

export const SessionsListParams = z.strictObject({
  limit: z.number().int().min(1).max(10_000).optional(),
  activeMinutes: z.number().int().min(1).optional(),
  agentId: agentId.optional(),
  kinds: kinds.optional(),
  label: label.optional(),
  search: z.string().max(200).optional(),
  spawnedBy: key.optional(),
  includeGlobal: z.boolean().optional(),
  includeUnknown: z.boolean().optional(),
  /**
   * Rows to skip, newest first: the next page starts at the previous answer's `nextOffset`. Kept
   * for older clients: a session updated between pages shifts offsets (a row listed twice or
   * never), and each page costs O(offset). Page with `order`/`cursor` instead.
   */
  offset: z.number().int().min(0).max(1_000_000).optional(),
  /** With it (or a cursor), one page by position and a `nextCursor`; "oldest" lists every session. */
  order: z.enum(["newest", "oldest"]).optional(),
  /** The previous answer's `nextCursor` (same filters and order): the page after it. */
  cursor: z
    .string()
    .min(1)
    .max(4096)
    .regex(/^[A-Za-z0-9_-]+$/, "not a cursor a session listing returned (nextCursor)")
    .optional(),
});

export const SessionsResolveParams = z
  .strictObject({
    key: key.optional(),
    sessionId: safeString("sessionId").max(512).optional(),
    label: label.optional(),
    agentId: agentId.optional(),
    spawnedBy: key.optional(),
  })
  .superRefine((p, ctx) => {
    const n = [p.key, p.sessionId, p.label].filter((v) => v !== undefined).length;
    if (n === 0) ctx.addIssue({ code: "custom", message: "Either key, sessionId, or label is required", path: [] });
    if (n > 1)
      ctx.addIssue({ code: "custom", message: "Provide either key, sessionId, or label (not multiple)", path: [] });
  });

export const SessionsPatchParams = SessionPatchSchema.extend({ key });
export const SessionsResetParams = z.strictObject({ key, reason: z.enum(["new", "reset"]).optional() });
export const SessionsCleanupParams = z.strictObject({ dryRun: z.boolean().optional() });
export const SessionsDeleteParams = z.strictObject({ key, deleteTranscript: z.boolean().optional() });
/** The most chat.history returns at once (OpenClaw's bound); `history --limit` says so by name. */
export const CHAT_HISTORY_MAX = 1000;
export const ChatHistoryParams = z.strictObject({
  sessionKey: key,
  limit: z.number().int().min(1).max(CHAT_HISTORY_MAX).optional(),
});

export const AgentParams = z.strictObject({
  sessionKey: key.optional(),
  agentId: agentId.optional(),
  // The configured limit is enforced at the door (gateway.limits.messageBytes, 413).
  message: z.string().min(1).max(MAX_MESSAGE_BYTES),
  deliver: z.boolean().optional(),
  channel: routeId("channel").optional(),
  to: routeId("to").optional(),
  accountId: routeId("accountId").optional(),
  threadId: z.union([routeId("threadId"), wholeNumberId("threadId")]).optional(),
  runTimeoutSeconds: z.number().int().min(0).max(172_800).optional(),
  idempotencyKey: z.string().max(200).optional(),
  extraSystemPrompt: z.string().max(100_000).optional(),
  /** `"isolated"`: this run starts in a fresh sessionId (OpenClaw's isolated cron runs). */
  sessionTarget: z.enum(["isolated", "session"]).optional(),
});

export const AgentWaitParams = z.strictObject({
  runId: safeString("runId").min(1).max(512),
  timeoutMs: z.number().int().min(0).max(600_000).optional(),
});

export const SendParams = z.strictObject({
  sessionKey: key.optional(),
  channel: routeId("channel").min(1),
  to: routeId("to").min(1).optional(),
  accountId: routeId("accountId").optional(),
  threadId: z.union([routeId("threadId"), wholeNumberId("threadId")]).optional(),
  // The configured limit is enforced at the door (gateway.limits.messageBytes, 413).
  message: z.string().min(1).max(MAX_MESSAGE_BYTES),
  idempotencyKey: z.string().max(200).optional(),
});

export const DeliveriesListParams = z.strictObject({
  sessionKey: key.optional(),
  channel: routeId("channel").optional(),
  /** Clamped to 1000 by the log. */
  limit: z.number().int().min(1).optional(),
});

/**
 * `deadletters.list`: oldest first; without `limit` every letter (as before paging), with it one page
 * and a `nextCursor` to pass back as `cursor` for the next.
 */
export const DeadLettersListParams = z.strictObject({
  limit: z.number().int().min(1).max(1000).optional(),
  cursor: safeString("cursor").min(1).max(200).optional(),
});

export const DeadLettersReplayParams = z.union([
  z.strictObject({ runId: safeString("runId").min(1).max(128) }),
  z.strictObject({ all: z.literal(true) }),
]);
/** One dead letter, by the runId that was given up (`deadletters.get`, `deadletters.discard`). */
export const DeadLetterRunParams = z.strictObject({ runId: safeString("runId").min(1).max(128) });

/** `status` takes nothing: it reports the deployment the gateway serves. */
export const StatusParams = z.strictObject({});
