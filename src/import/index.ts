/** Importing OpenClaw / Clawdbot state (docs/concepts/openclaw-import.md). */
export { importOpenClaw, type ImportOptions, type ImportProgress, type ImportReport, type ImportTargets } from "./runner.js";
export { createProgressReporter, formatImportSummary, type ProgressReporter } from "./progress.js";
export { resolveOpenClawStateDir, stateDirOfStore } from "./state-dir.js";
export { scanJsonStores, jsonlTranscript } from "./json-store.js";
export { scanSqliteStores, SQLITE_STORE_FILE } from "./sqlite-store.js";
export { mapOpenClawEntry, dedupeSessions, transcriptLineToEntry, derivedLineId, changedFields, type MappedSession } from "./openclaw-entry.js";
export type { SourceSession, TranscriptSource, RawTranscriptLine, Skip, SkipReason, StoreScan, StoreGeneration } from "./types.js";
