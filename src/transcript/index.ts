/**
 * Transcripts: append-only JSONL files on shared storage, indexed in Redis (docs/concepts/sessions.md,
 * "Transcripts").
 */
export * from "../history/transcript-types.js";
export {
  transcriptPath,
  archivePath,
} from "./paths.js";
export {
  readTail,
  readAllEntries,
  readHeader,
} from "./tail-reader.js";
export {
  TranscriptStore,
  transcriptKeys,
} from "./transcript-store.js";
