/**
 * The `POST /v1/inbound` body (docs/concepts/sessions.md, "Routing inbound messages"): one message
 * arriving from a channel.
 *
 * Strict on purpose: unknown keys are rejected so a misspelt `groupID` fails loudly instead of
 * silently routing a group message into the main DM session. Identifiers that become session
 * key segments are trimmed and bounded and may not contain control, bidi or invisible characters
 * (unsafe-chars.ts), so a valid message always yields a valid key (`resolveInboundSession`
 * still re-checks the total length).
 */
import { z } from "zod";
import { zodIssues } from "../config/parse.js";
import { ValidationError } from "../errors/index.js";
import { safeString, wholeNumberId } from "./safe-text-schema.js";

/** `new Date(8.64e15)` is the latest valid JavaScript date (ECMAScript's time value range). */
const MAX_DATE_MS = 8_640_000_000_000_000;

/** The earliest `timestamp` accepted: 2001-09-09 in ms; every seconds timestamp until 33658 AD lies below it. */
const MIN_TIMESTAMP_MS = 1_000_000_000_000;

/** Inbound "channels" that are system events, not people: they never reset a session. */
export const SYSTEM_EVENT_CHANNELS: ReadonlySet<string> = new Set(["heartbeat", "cron-event", "exec-event"]);

/** A trimmed, non-empty identifier of bounded length without unsafe characters. */
function idString(what: string, max: number) {
  return safeString(what).min(1, "must not be empty").max(max, `must be at most ${max} characters`);
}

/** Channels send numeric ids as numbers (Telegram chat ids, thread ids); keys hold strings. */
function idStringOrNumber(what: string, max: number) {
  return z.union([idString(what, max), wholeNumberId(what)]).transform((id) => String(id));
}

export const INBOUND_CHAT_TYPES = ["dm", "direct", "group", "channel"] as const;

export const InboundMessageSchema = z
  .strictObject({
    channel: z
      .string()
      .trim()
      .toLowerCase()
      .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must be a channel id: [a-z0-9][a-z0-9_-]{0,63}"),
    accountId: idString("accountId", 64).optional(),
    // `direct` is OpenClaw's spelling; Switchboard's keys say `dm`.
    chatType: z.enum(INBOUND_CHAT_TYPES).transform((t): "dm" | "group" | "channel" => (t === "direct" ? "dm" : t)),
    from: idString("from", 200),
    to: idString("to", 256).optional(),
    groupId: idStringOrNumber("groupId", 200).optional(),
    threadId: idStringOrNumber("threadId", 100).optional(),
    senderName: z.string().max(256).optional(),
    groupSubject: z.string().max(512).optional(),
    text: z.string().refine((s) => s.trim().length > 0, "text must not be empty"),
    messageId: idStringOrNumber("messageId", 256).optional(),
    timestamp: z
      .number()
      .int("must be an integer (ms since epoch)")
      .positive("must be a positive ms timestamp")
      // Milliseconds, never seconds (Telegram's `date`, Slack's `ts`): a seconds value read as ms
      // lies in January 1970, so every message would be judged stale (a new session each time).
      // No channel sends a real message from before 2001-09-09 (1e12 ms).
      .min(
        MIN_TIMESTAMP_MS,
        "must be milliseconds since the epoch (at least 1000000000000); a value in seconds must be multiplied by 1000",
      )
      // The last instant a JavaScript Date can hold: beyond it every date computed from the
      // message (freshness, transcript times) is invalid and the turn could never run.
      .max(MAX_DATE_MS, "must be a ms timestamp a date can hold (at most 8640000000000000)")
      .optional(),
    // Switchboard extra: which agent handles the message (default agent otherwise).
    agentId: z
      .string()
      .trim()
      .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/i, "must match [a-z0-9][a-z0-9_-]{0,63}")
      .toLowerCase()
      .optional(),
  })
  .superRefine((msg, ctx) => {
    if ((msg.chatType === "group" || msg.chatType === "channel") && msg.groupId === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["groupId"],
        message: `required when chatType is "${msg.chatType}"`,
      });
    }
  });

export type InboundMessage = z.output<typeof InboundMessageSchema>;

/** Parse an inbound body or throw ValidationError with every issue as `{ path, message }` (HTTP 400). */
export function parseInboundMessage(body: unknown): InboundMessage {
  const result = InboundMessageSchema.safeParse(body);
  if (!result.success) throw ValidationError.fromIssues("invalid inbound message", zodIssues(result.error));
  return result.data;
}
