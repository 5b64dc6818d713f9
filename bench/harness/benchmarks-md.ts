/**
 * BENCHMARKS.md: the figures of one run with the facts needed to read them (machine, load,
 * command). Rendering is pure (unit-tested); writing is one call.
 */
import { writeFileSync } from "node:fs";
import type { MachineFacts } from "./machine.js";
import { formatJudged, formatTarget, MARK, summarize, type FigureResult } from "./report.js";
import { formatRatio, formatValue } from "./stats.js";

export interface RunInfo {
  command: string;
  quick: boolean;
  rounds: number;
  startedAt: Date;
  durationMs: number;
  machine: MachineFacts;
  /** 1-minute load average before and after the run: a shared machine shows here. */
  loadBefore: number;
  loadAfter: number;
}

function cell(s: string): string {
  return s.replace(/\|/g, "\\|");
}

export function renderBenchmarksMd(results: FigureResult[], run: RunInfo): string {
  const m = run.machine;
  const busy = Math.max(run.loadBefore, run.loadAfter) > m.cores;
  const out: string[] = [
    "# Benchmarks",
    "",
    "Written by `npm run bench` (see bench/README.md for what each figure measures and what its baseline is).",
    "Every figure is a ratio to a baseline measured in the same run on the same Redis, median of the rounds;",
    "absolute numbers depend on the machine, ratios much less.",
    "",
    `- date: ${run.startedAt.toISOString()}`,
    `- command: \`${run.command}\`${run.quick ? " (quick: fewer units, not comparable with a full run)" : ""}`,
    `- rounds: ${run.rounds}; the bench took ${(run.durationMs / 1000).toFixed(1)} s`,
    `- machine: ${m.cores} cores (${m.cpuModel}), ${m.memGiB.toFixed(1)} GiB RAM, ${m.platform}`,
    `- node ${m.node}, redis-server ${m.redisVersion} (private instance started by the bench: AOF on, ` +
      `appendfsync everysec)`,
    `- load average (1 min): ${run.loadBefore.toFixed(2)} before, ${run.loadAfter.toFixed(2)} after`,
  ];
  if (busy) {
    out.push(
      "",
      `> **The machine was shared with other work during this run** (load above its ${m.cores} cores).`,
      "> Both sides of each ratio ran under the same load, but absolute numbers are low and noisy.",
    );
  }
  out.push(
    "",
    "## Summary",
    "",
    "| | figure | measured / target | median measured | median baseline |",
    "|---|---|---|---|---|",
  );
  for (const f of results) {
    for (const row of f.rows) {
      const s = summarize(row);
      const skipped = s.verdict === "skipped";
      out.push(
        `| ${MARK[s.verdict]} | (${f.id}) ${cell(row.label)} | ${cell(formatJudged(row, s))} | ` +
          `${skipped ? "" : `${formatValue(s.measured)} ${row.unit}`} | ` +
          `${skipped ? "" : `${formatValue(s.baseline)} ${cell(row.unit)} (${cell(row.baselineLabel)})`} |`,
      );
    }
  }
  for (const f of results) {
    out.push("", `## (${f.id}) ${f.title}`, "", f.setup, "");
    for (const row of f.rows) {
      const s = summarize(row);
      out.push(
        `**${row.label}**` +
          `${row.target ? ` — target ${formatTarget(row.target, row.unit)}` : " — no target (information)"}: ` +
          `${MARK[s.verdict]}`,
        "",
      );
      if (s.verdict === "skipped") {
        out.push(`Skipped: ${row.skipped}`, "");
        continue;
      }
      out.push("| round | measured | baseline | ratio |", "|---|---|---|---|");
      row.measured.forEach((v, i) => {
        const b = row.baseline[i];
        out.push(
          `| ${i + 1} | ${formatValue(v)} ${row.unit} | ` +
            `${b === undefined ? "" : `${formatValue(b)} ${row.unit}`} | ` +
            `${formatRatio(s.ratios[i] ?? Number.NaN)} |`,
        );
      });
      out.push(
        `| **median** | **${formatValue(s.measured)} ${row.unit}** | ` +
          `**${formatValue(s.baseline)} ${row.unit}** | **${formatRatio(s.ratio)}** |`,
        "",
      );
      out.push(`Baseline: ${row.baselineLabel}.`, "");
    }
    if (f.notes.length) out.push(...f.notes.map((n) => `- ${n}`), "");
  }
  return `${out
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`;
}

export function writeBenchmarksMd(path: string, results: FigureResult[], run: RunInfo): void {
  writeFileSync(path, renderBenchmarksMd(results, run));
}
