/**
 * Transcripts: append-only JSONL files on shared storage, indexed in Redis (docs/concepts/sessions.md,
 * "Transcripts").
 */
export * from "../history/transcript-types.js";
export {
  AGENT_ID_RE,
  SESSION_ID_RE,
  MAX_TRANSCRIPT_NAME,
  assertAgentId,
  assertSessionId,
  transcriptFileName,
  transcriptRelativePath,
  sessionsDir,
  transcriptPath,
  archivePath,
  type ArchiveKind,
} from "./paths.js";
export {
  DEFAULT_CHUNK_SIZE,
  parseEntryLine,
  readTail,
  readLastEntries,
  scanLines,
  iterateEntries,
  readAllEntries,
  readHeader,
  type TailReadOptions,
  type TailReadResult,
  type ScannedLine,
} from "./tail-reader.js";
export {
  TranscriptStore,
  transcriptKeys,
  type TranscriptStoreOptions,
  type TranscriptKeys,
  type TopicOption,
  type EnsureOptions,
  type AppendOptions,
  type AppendResult,
} from "./transcript-store.js";
