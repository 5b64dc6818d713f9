/** Importing OpenClaw / Clawdbot state (docs/concepts/openclaw-import.md). */
export { importOpenClaw, type ImportProgress, type ImportReport, type ImportTargets } from "./runner.js";
export { createProgressReporter, formatImportSummary, type ProgressReporter } from "./progress.js";
export { removeSnapshotsSync } from "./sqlite-store.js";
export { resolveOpenClawStateDir } from "./state-dir.js";
