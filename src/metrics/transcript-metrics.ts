/**
 * What a worker's transcript writer reports: its fsyncs (of files, and of directories that got
 * a new name) and the background fsyncs that failed, after which lines of finished turns may
 * not be durable (docs/concepts/reliability.md).
 */
import { Counter } from "prom-client";
import { processRegistry } from "./registry.js";

let instruments: { fsyncs: Counter<"target">; failures: Counter } | undefined;

function transcriptInstruments() {
  if (instruments) return instruments;
  const registers = [processRegistry()];
  instruments = {
    fsyncs: new Counter({
      name: "switchboard_transcript_fsyncs_total",
      help: "fsyncs done by this process's transcript writer: of transcript files, or of directories (new names)",
      labelNames: ["target"],
      registers,
    }),
    failures: new Counter({
      name: "switchboard_transcript_fsync_failures_total",
      help: "Background transcript fsyncs that failed: lines of finished turns may not be durable",
      registers,
    }),
  };
  return instruments;
}

/** Create the instruments so a scrape shows them (at zero) before the first write. */
export function registerTranscriptMetrics(): void {
  transcriptInstruments();
}

export function transcriptSynced(target: "file" | "dir"): void {
  transcriptInstruments().fsyncs.inc({ target });
}

export function transcriptSyncFailed(): void {
  transcriptInstruments().failures.inc();
}
