/** Importing OpenClaw / Clawdbot state (docs/concepts/openclaw-import.md). */
export { importOpenClaw, type ImportProgress, type ImportReport, type ImportTargets } from "./runner.js";
export { createProgressReporter, formatImportSummary } from "./progress.js";
export { resolveOpenClawStateDir } from "./state-dir.js";
