/**
 * The session entry stored per session key: the fields of the seeds' row shape and
 * docs/concepts/sessions.md, "The session entry". `SessionPatchSchema` validates what operators may change through
 * `sessions.patch`; internal writers use `SessionEntryPatch` directly.
 */
import { z } from "zod";
import { safeString } from "./safe-text-schema.js";

export const DeliveryContextSchema = z.strictObject({
  channel: z.string().optional(),
  to: z.string().optional(),
  accountId: z.string().optional(),
  threadId: z.string().optional(),
});
export type DeliveryContext = z.infer<typeof DeliveryContextSchema>;

export interface SessionOrigin {
  label?: string;
  provider?: string;
  chatType?: string;
  from?: string;
  to?: string;
  accountId?: string;
  threadId?: string;
}

export type SessionKind = "main" | "group" | "cron" | "hook" | "node" | "other";

export interface SessionEntry {
  key: string;
  sessionId: string;
  agentId: string;
  kind: SessionKind;
  updatedAt: number;
  createdAt: number;
  rev: number;
  // identity
  label?: string;
  displayName?: string;
  subject?: string;
  chatType?: "dm" | "group" | "channel";
  channel?: string;
  groupId?: string;
  topicId?: string;
  origin?: SessionOrigin;
  // delivery (external routes only: inter-session traffic never overwrites these)
  deliveryContext?: DeliveryContext;
  lastChannel?: string;
  lastTo?: string;
  lastAccountId?: string;
  lastThreadId?: string;
  // lineage (immutable once set)
  spawnedBy?: string;
  parentSessionKey?: string;
  spawnDepth?: number;
  subagentRole?: "orchestrator" | "leaf";
  sandboxed?: boolean;
  // toggles and model
  sendPolicy?: "allow" | "deny";
  model?: string;
  modelOverride?: string;
  providerOverride?: string;
  thinkingLevel?: string;
  verboseLevel?: string;
  // run state
  systemSent?: boolean;
  abortedLastRun?: boolean;
  status?: "running" | "done" | "failed" | "killed" | "timeout";
  startedAt?: number;
  endedAt?: number;
  runtimeMs?: number;
  // usage
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  contextTokens?: number;
  /** The session this one replaced at its last reset, for the audit trail. */
  previousSessionId?: string;
  resetReason?: string;
  /**
   * When the current session was started by a rotation that was not a message (the sweep,
   * `sessions.reset`). While no message has touched it since (`resetAt >= updatedAt`), its
   * clocks run from `resetAt` (the reset is activity), and it is fresh only while it holds nothing
   * a rollover would clear (src/session/entry-freshness.ts).
   */
  resetAt?: number;
}

/** A write: any entry field, with null meaning "remove this field". */
export type SessionEntryPatch = {
  [K in keyof SessionEntry]?: SessionEntry[K] | null;
};

/**
 * An object field of a patch that replaces the stored one rather than merging into it: the
 * `fields` it lacks are sent as null, which the store's one-level merge removes
 * (session-upsert.lua). Typed as the object itself, since only the store sees the nulls.
 */
export function replacingFields<T extends object>(value: T, fields: readonly (keyof T & string)[]): T {
  const out = { ...value } as Record<string, unknown>;
  for (const f of fields) if (out[f] === undefined) out[f] = null;
  return out as T;
}

/** What `sessions.patch` accepts from operators and tools: the toggles, never ids or lineage. */
export const SessionPatchSchema = z.strictObject({
  label: safeString("label", "label").min(1).max(512).nullable().optional(),
  displayName: safeString("displayName", "label").max(512).nullable().optional(),
  sendPolicy: z
    .string()
    .transform((v) => v.toLowerCase())
    .pipe(z.enum(["allow", "deny"], { error: 'invalid sendPolicy (use "allow"|"deny")' }))
    .nullable()
    .optional(),
  model: z.string().min(1).max(200).nullable().optional(),
  thinkingLevel: z.string().max(32).nullable().optional(),
  verboseLevel: z.string().max(32).nullable().optional(),
});

/** An entry with its JSON exactly as stored: what a push can check it is still (turn-push.lua). */
export interface KnownEntry {
  raw: string;
  entry: SessionEntry;
}

/** The entry stored as `raw` (null: no session). */
export function knownFrom(raw: string | null): KnownEntry | null {
  return raw === null ? null : { raw, entry: JSON.parse(raw) as SessionEntry };
}
