/**
 * What the two OpenClaw store readers hand to the import runner, and what the runner reports.
 * Readers only read: nothing here writes to the OpenClaw state dir.
 */

/** Which on-disk layout a session came from (docs/concepts/openclaw-import.md). */
export type StoreGeneration = "json" | "sqlite";

/** One raw transcript line as read from a JSONL file or a `transcript_events` row. */
export interface RawTranscriptLine {
  /** 1-based line number (JSONL) or the row's `seq` (SQLite): used in derived ids and reports. */
  position: number;
  /** The JSON text, or undefined when the line could not be read (see `unreadable`). */
  text?: string;
  /** Why the line has no text (e.g. a zstd-compressed row this Node cannot inflate). */
  unreadable?: string;
}

export interface TranscriptSource {
  /** Where the lines come from, for reports: a file path or `<db>#<sessionId>`. */
  describe: string;
  /** Set for OpenClaw topic transcripts (`<sessionId>-topic-<id>.jsonl`). */
  topicId?: string;
  /** The lines in order. May throw when the source cannot be read (reported, not fatal). */
  lines(): AsyncIterable<RawTranscriptLine>;
}

/** A session row exactly as a store holds it, before any mapping or validation. */
export interface SourceSession {
  generation: StoreGeneration;
  /** Store file the row came from (reports). */
  store: string;
  /** The agent that owns the store: bare keys in it belong to this agent. */
  storeAgentId: string;
  rawKey: string;
  /** The OpenClaw SessionEntry object (may be anything: stores are not trusted). */
  entry: unknown;
  /** Used when the entry has no usable `updatedAt` (old stores): the store's own timestamp. */
  fallbackUpdatedAt: number;
  /** Fallback when the entry lacks `sessionId` (the SQLite row carries it separately). */
  fallbackSessionId?: string;
  transcript?: TranscriptSource;
}

export type SkipReason =
  | "unreadable_store"
  | "bad_agent_dir"
  | "bad_entry"
  | "bad_key"
  | "bad_session_id"
  | "duplicate_key"
  | "duplicate_session_id"
  | "conflict"
  | "orphan_transcript"
  /** The session's transcript is a symlink out of its sessions directory, or to nothing: session not imported. */
  | "linked_transcript"
  | "unreadable_transcript";

export interface Skip {
  reason: SkipReason;
  /** Store, file or row the skip is about. */
  source: string;
  key?: string;
  detail: string;
}

/** What a store reader found: sessions to import and what it had to leave out. */
export interface StoreScan {
  sessions: SourceSession[];
  skips: Skip[];
  /** Store files read (reports). */
  stores: string[];
  /** Releases open databases and temporary copies. */
  close(): Promise<void>;
}
