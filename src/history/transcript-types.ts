/**
 * Transcript line shapes (docs/concepts/sessions.md, "Transcripts"), kept compatible with OpenClaw's JSONL so imported
 * transcripts read the same. Validation is loose on purpose for *reading* (old files carry
 * fields we do not know); writers build lines from these types.
 */
import { z } from "zod";

export const TextBlockSchema = z.looseObject({ type: z.literal("text"), text: z.string() });
export const ThinkingBlockSchema = z.looseObject({ type: z.literal("thinking"), thinking: z.string() });
export const ToolCallBlockSchema = z.looseObject({
  type: z.literal("toolCall"),
  id: z.string(),
  name: z.string(),
  arguments: z.unknown(),
});
export const ContentBlockSchema = z.union([
  TextBlockSchema,
  ThinkingBlockSchema,
  ToolCallBlockSchema,
  z.looseObject({ type: z.string() }),
]);

export const ProvenanceSchema = z.looseObject({
  kind: z.enum(["external_user", "inter_session", "internal_system"]),
  sourceSessionKey: z.string().optional(),
  sourceChannel: z.string().optional(),
  sourceTool: z.string().optional(),
  sourceRunId: z.string().optional(),
});

export type ContentBlock = z.infer<typeof ContentBlockSchema>;
export type Provenance = z.infer<typeof ProvenanceSchema>;

/** One message as stored: role, content (string or blocks) and whatever else the writer kept. */
export interface TranscriptMessage {
  role: "user" | "assistant" | "toolResult" | "system" | "tool" | (string & {});
  content: string | ContentBlock[];
  timestamp?: number;
  provenance?: Provenance;
  usage?: { input?: number; output?: number; totalTokens?: number; [k: string]: unknown };
  stopReason?: string;
  model?: string;
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  [k: string]: unknown;
}

export interface TranscriptHeader {
  type: "session";
  version: number;
  id: string;
  timestamp: string;
  parentSession?: string;
  [k: string]: unknown;
}

/** Every line after the header. `id` is unique within the file: appends are idempotent on it. */
export interface TranscriptEntry {
  type: "message" | (string & {});
  id: string;
  parentId?: string | null;
  timestamp: string;
  message?: TranscriptMessage;
  /** Switchboard: the run that wrote this line (crash re-runs find their own lines by it). */
  runId?: string;
  [k: string]: unknown;
}

export const TRANSCRIPT_VERSION = 3;
