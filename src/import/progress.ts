/**
 * Progress of an import for people: a cli-progress bar when stderr is a terminal, plain lines
 * (at most one every `intervalMs`, plus the last) when it is piped or logged, so a log file
 * does not fill with redraw sequences.
 */
import cliProgress from "cli-progress";
import type { ImportProgress, ImportReport } from "./runner.js";

export interface ProgressReporter {
  update(p: ImportProgress): void;
  stop(): void;
}

function countsLine(c: ImportProgress["counts"]): string {
  return `created ${c.created}, updated ${c.updated}, unchanged ${c.unchanged}`;
}

export function createProgressReporter(
  stream: NodeJS.WriteStream = process.stderr,
  opts: { intervalMs?: number; label?: string } = {},
): ProgressReporter {
  const label = opts.label ?? "import";
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        stream,
        format: `${label} [{bar}] {percentage}% | {value}/{total} sessions | {counts}`,
        hideCursor: true,
        clearOnComplete: false,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(p) {
        if (!started) {
          bar.start(p.total, p.done, { counts: countsLine(p.counts) });
          started = true;
        } else bar.update(p.done, { counts: countsLine(p.counts) });
      },
      stop() {
        if (started) bar.stop();
      },
    };
  }
  const interval = opts.intervalMs ?? 2000;
  let last = -Infinity;
  let lastDone = -1;
  return {
    update(p) {
      const now = Date.now();
      if (p.done !== p.total && now - last < interval) return;
      if (p.done === lastDone) return;
      last = now;
      lastDone = p.done;
      stream.write(`${label}: ${p.done}/${p.total} sessions (${countsLine(p.counts)})\n`);
    },
    stop() {},
  };
}

/** The end-of-run summary: what was imported, then every skip reason with a few examples. */
export function formatImportSummary(r: ImportReport, examplesPerReason = 3): string {
  const out: string[] = [];
  const s = r.sessions;
  const t = r.transcripts;
  out.push(`${r.dryRun ? "Dry run (nothing written)" : "Imported"} from ${r.stateDir}`);
  out.push(`  stores: ${r.stores.json.length} sessions.json, ${r.stores.sqlite.length} SQLite`);
  out.push(
    `  sessions: ${s.found} found, ${s.created} ${r.dryRun ? "to create" : "created"}, ` +
      `${s.updated} ${r.dryRun ? "to update" : "updated"}, ` +
      `${s.unchanged} unchanged, ${s.keptNewer} kept (newer in Switchboard), ${s.skipped} skipped`,
  );
  const ls = t.linesSkipped;
  out.push(
    `  transcripts: ${t.read} read, ${t.linesWritten} lines ${r.dryRun ? "to write" : "written"}, ` +
      `${t.linesPresent} already present, ` +
      `${ls.unparseable + ls.not_an_entry + ls.unreadable} lines skipped (${ls.unparseable} unparseable, ` +
      `${ls.not_an_entry} not an entry, ${ls.unreadable} unreadable)`,
  );
  const byReason = new Map<string, typeof r.skipped>();
  for (const k of r.skipped) byReason.set(k.reason, [...(byReason.get(k.reason) ?? []), k]);
  if (byReason.size > 0) out.push("  skipped:");
  for (const [reason, list] of [...byReason].sort((a, b) => b[1].length - a[1].length)) {
    out.push(`    ${reason}: ${list.length}`);
    for (const k of list.slice(0, examplesPerReason))
      out.push(`      - ${k.key ? `${k.key} (${k.source})` : k.source}: ${k.detail}`);
    if (list.length > examplesPerReason)
      out.push(`      … and ${list.length - examplesPerReason} more (--json lists all)`);
  }
  for (const w of r.warnings.slice(0, 10)) out.push(`  warning: ${w}`);
  if (r.warnings.length > 10) out.push(`  … and ${r.warnings.length - 10} more warnings (--json lists all)`);
  return `${out.join("\n")}\n`;
}
