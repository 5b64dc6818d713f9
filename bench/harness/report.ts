/**
 * What a figure reports and how it is judged, as plain data and pure functions (unit-tested):
 * every row holds its per-round measured and baseline values; the ratio of a round is taken
 * within that round (both sides measured minutes apart at most, under the same load), and the
 * row is judged on the median over the rounds.
 */
import { formatRatio, formatValue, median, ratio } from "./stats.js";

/** A goal: on the ratio to the baseline, or on the measured value itself (an absolute bound). */
export interface Target {
  on: "ratio" | "measured";
  op: ">=" | "<=";
  value: number;
}

export interface Row {
  /** What is measured, e.g. "turns/s, in-process, echo". */
  label: string;
  /** Unit of measured and baseline values, e.g. "turns/s", "ms", "MB". */
  unit: string;
  /** What the baseline is, e.g. "bare BullMQ add+process jobs/s". */
  baselineLabel: string;
  measured: number[];
  baseline: number[];
  /** Absent: reported for information, not judged. */
  target?: Target;
  /** Set instead of values when the row could not be measured (and why). */
  skipped?: string;
}

export interface FigureResult {
  id: string;
  title: string;
  /** Sizes and settings of this run (units, sessions, concurrency…). */
  setup: string;
  rows: Row[];
  /** Observations worth keeping next to the numbers (command breakdowns, caveats). */
  notes: string[];
}

export interface RowSummary {
  measured: number;
  baseline: number;
  ratio: number;
  /** Per-round ratios, in round order. */
  ratios: number[];
  verdict: "pass" | "miss" | "info" | "skipped";
}

export function summarize(row: Row): RowSummary {
  if (row.skipped || row.measured.length === 0) {
    return { measured: Number.NaN, baseline: Number.NaN, ratio: Number.NaN, ratios: [], verdict: "skipped" };
  }
  const ratios = row.measured.map((m, i) => ratio(m, row.baseline[i] ?? Number.NaN));
  const finite = ratios.filter(Number.isFinite);
  const s = {
    measured: median(row.measured),
    baseline: row.baseline.length ? median(row.baseline) : Number.NaN,
    ratio: finite.length ? median(finite) : Number.NaN,
    ratios,
  };
  if (!row.target) return { ...s, verdict: "info" };
  const judged = row.target.on === "ratio" ? s.ratio : s.measured;
  return { ...s, verdict: meets(judged, row.target) ? "pass" : "miss" };
}

export function meets(value: number, t: Target): boolean {
  if (!Number.isFinite(value)) return false;
  return t.op === ">=" ? value >= t.value : value <= t.value;
}

export function formatTarget(t: Target, unit: string): string {
  const op = t.op === ">=" ? "≥" : "≤";
  const v = Number.isInteger(t.value) ? t.value.toLocaleString("en-US") : formatValue(t.value);
  return t.on === "ratio" ? `${op} ${formatRatio(t.value)}` : `${op} ${v} ${unit}`;
}

/** "0.17x / ≥ 0.80x" or "22.1 round trips / ≤ 5.00 round trips": what was judged against what. */
export function formatJudged(row: Row, s: RowSummary): string {
  if (s.verdict === "skipped") return `skipped: ${row.skipped ?? "no data"}`;
  const shown =
    !row.target || row.target.on === "ratio" ? formatRatio(s.ratio) : `${formatValue(s.measured)} ${row.unit}`;
  return row.target ? `${shown} / ${formatTarget(row.target, row.unit)}` : `${shown} (no target)`;
}

export const MARK: Record<RowSummary["verdict"], string> = {
  pass: "✓ pass",
  miss: "✗ MISS",
  info: "· info",
  skipped: "- skip",
};

/** Absolute numbers of one round, e.g. "640 turns/s vs 3,650 (bare …) → 0.18x". */
export function formatRound(row: Row, i: number): string {
  const m = row.measured[i];
  const b = row.baseline[i];
  if (m === undefined) return "";
  const base =
    b === undefined ? "" : ` vs ${formatValue(b)} ${row.unit} (${row.baselineLabel}) → ${formatRatio(ratio(m, b))}`;
  return `${formatValue(m)} ${row.unit}${base}`;
}

/** The console table: one line per row, median values and the verdict. */
export function renderTable(results: FigureResult[]): string {
  const lines: string[] = [];
  for (const f of results) {
    for (const row of f.rows) {
      const s = summarize(row);
      const values =
        s.verdict === "skipped"
          ? ""
          : `  [median ${formatValue(s.measured)} vs ${formatValue(s.baseline)} ${row.unit}]`;
      lines.push(`${MARK[s.verdict]}  (${f.id}) ${row.label}: ${formatJudged(row, s)}${values}`);
    }
  }
  return lines.join("\n");
}
