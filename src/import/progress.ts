/**
 * Progress of an import for people: a cli-progress bar when stderr is a terminal, plain lines
 * (at most one every `intervalMs`, plus the last) when it is piped or logged, so a log file
 * does not fill with redraw sequences. Both move while the stores are read and with every batch
 * of transcript lines, so one very long session does not look like a hang.
 */
import cliProgress from "cli-progress";
import type { ImportProgress, ImportReport } from "./runner.js";

export interface ProgressReporter {
  update(p: ImportProgress): void;
  /** Ends the bar and gives the terminal back (cursor shown, line wrap on). Safe to call twice. */
  stop(): void;
}

function countsLine(c: ImportProgress["counts"]): string {
  return `created ${c.created}, updated ${c.updated}, unchanged ${c.unchanged}`;
}

function scanLine(p: ImportProgress): string {
  return `reading stores: ${p.found} sessions found`;
}

function linesOf(p: ImportProgress): string {
  return `${p.lines} transcript lines`;
}

export function createProgressReporter(
  stream: NodeJS.WriteStream = process.stderr,
  opts: { intervalMs?: number; label?: string } = {},
): ProgressReporter {
  const label = opts.label ?? "import";
  if (stream.isTTY) {
    const barFormat = `${label} [{bar}] {percentage}% | {value}/{total} sessions | {lines} | {counts}`;
    const bar = new cliProgress.SingleBar(
      {
        stream,
        // While the stores are read there is no total yet: a line that says so, not an empty bar.
        format: (options, params, payload: { phase?: string; scan?: string }) =>
          payload.phase === "scan"
            ? `${label}: ${payload.scan}`
            : cliProgress.Format.Formatter({ ...options, format: barFormat }, params, payload),
        hideCursor: true,
        clearOnComplete: false,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    let stopped = false;
    return {
      update(p) {
        if (stopped) return;
        const payload = { phase: p.phase, scan: scanLine(p), lines: linesOf(p), counts: countsLine(p.counts) };
        if (!started) {
          bar.start(p.total, p.done, payload);
          started = true;
          return;
        }
        if (p.total !== bar.getTotal()) bar.setTotal(p.total);
        bar.update(p.done, payload);
      },
      stop() {
        if (started && !stopped) bar.stop();
        stopped = true;
      },
    };
  }
  const interval = opts.intervalMs ?? 2000;
  let last = -Infinity;
  let lastLine = "";
  let stopped = false;
  return {
    update(p) {
      if (stopped) return;
      const final = p.phase === "import" && p.done === p.total;
      const now = Date.now();
      if (!final && now - last < interval) return;
      const line =
        p.phase === "scan"
          ? `${label}: ${scanLine(p)}`
          : `${label}: ${p.done}/${p.total} sessions, ${linesOf(p)} (${countsLine(p.counts)})`;
      if (line === lastLine) return;
      last = now;
      lastLine = line;
      stream.write(`${line}\n`);
    },
    stop() {
      stopped = true;
    },
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
      (t.linesNotImported ? `${t.linesNotImported} not imported (session newer in Switchboard), ` : "") +
      `${ls.unparseable + ls.not_an_entry + ls.unreadable} lines skipped (${ls.unparseable} unparseable, ` +
      `${ls.not_an_entry} not an entry, ${ls.unreadable} unreadable)`,
  );
  const byReason = new Map<string, typeof r.skipped>();
  for (const k of r.skipped) {
    const list = byReason.get(k.reason);
    if (list) list.push(k);
    else byReason.set(k.reason, [k]);
  }
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
