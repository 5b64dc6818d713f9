/**
 * The example Grafana dashboard over deployment-wide series. Every gateway serves the same
 * numbers for them (read from Redis), and Prometheus tells the gateways apart by `instance`: a
 * panel that sums them counts each once per gateway. So the first aggregation over such a series
 * must be `max` by deployment (or `min`, for a health flag), and only then may deployments add up.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createDeploymentRegistry } from "../../src/metrics/deployment-metrics.js";
import type { DeploymentMetricsDeps } from "../../src/metrics/deployment-metrics.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The deployment-wide series, as the gateway registers them (nothing is read from Redis here). */
function deploymentWideNames(): string[] {
  const deps = { config: { redis: { prefix: "x" } }, queues: {} } as unknown as DeploymentMetricsDeps;
  return createDeploymentRegistry(deps)
    .getMetricsAsArray()
    .map((m) => m.name);
}

const AGGREGATIONS = new Set(["sum", "avg", "max", "min", "count", "group", "stddev", "stdvar", "topk", "bottomk"]);

/** The word that ends just before `end` in `expr` (after spaces), and where it starts. */
function wordBefore(expr: string, end: number): { word: string; start: number } {
  let i = end;
  while (i > 0 && /\s/.test(expr[i - 1]!)) i--;
  let start = i;
  while (start > 0 && /\w/.test(expr[start - 1]!)) start--;
  return { word: expr.slice(start, i), start };
}

/** From the `)` at `close`, the index of its `(`. */
function openingOf(expr: string, close: number): number {
  let depth = 0;
  for (let i = close; i >= 0; i--) {
    if (expr[i] === ")") depth++;
    else if (expr[i] === "(" && --depth === 0) return i;
  }
  throw new Error(`unbalanced parentheses in ${expr}`);
}

/**
 * The aggregations enclosing position `at` of a PromQL expression, innermost first, with their
 * `by` labels (`max by (deployment) (x)` and `max(x) by (deployment)` alike).
 */
function enclosingAggregations(expr: string, at: number): { op: string; by: string[] | null }[] {
  const found: { op: string; by: string[] | null }[] = [];
  let depth = 0;
  for (let i = at - 1; i >= 0; i--) {
    const c = expr[i];
    if (c === ")") depth++;
    else if (c === "(" && depth > 0) depth--;
    else if (c === "(") {
      let by: string[] | null = null;
      let { word, start } = wordBefore(expr, i);
      if (!word && /\)\s*$/.test(expr.slice(0, i))) {
        // `op by (labels) (` : the labels, then the operator before them.
        const close = expr.slice(0, i).trimEnd().length - 1;
        const open = openingOf(expr, close);
        const clause = wordBefore(expr, open);
        if (clause.word === "by" || clause.word === "without") {
          if (clause.word === "by") by = labelsIn(expr.slice(open + 1, close));
          ({ word, start } = wordBefore(expr, clause.start));
        }
      }
      if (AGGREGATIONS.has(word)) {
        // `op (x) by (labels)`: the clause after the closing parenthesis.
        const after = expr.slice(closingOf(expr, i) + 1).match(/^\s*by\s*\(([^)]*)\)/);
        if (after) by = labelsIn(after[1]!);
        found.push({ op: word, by });
      }
      i = start;
    }
  }
  return found;
}

function closingOf(expr: string, open: number): number {
  let depth = 0;
  for (let i = open; i < expr.length; i++) {
    if (expr[i] === "(") depth++;
    else if (expr[i] === ")" && --depth === 0) return i;
  }
  throw new Error(`unbalanced parentheses in ${expr}`);
}

function labelsIn(list: string): string[] {
  return list
    .split(",")
    .map((l) => l.trim())
    .filter(Boolean);
}

/** Why `expr` would add up a deployment-wide series across gateways (null: it does not). */
function sumsAcrossGateways(expr: string, names: string[]): string | null {
  for (const name of names) {
    for (const m of expr.matchAll(new RegExp(`\\b${name}\\b`, "g"))) {
      const inner = enclosingAggregations(expr, m.index)[0];
      if (!inner) return `${name} is not aggregated (one series per gateway)`;
      if (inner.op === "min") continue;
      if (inner.op !== "max") return `${name} is first aggregated with ${inner.op}, not max`;
      if (inner.by && !inner.by.includes("deployment"))
        return `${name}: max by (${inner.by.join(", ")}) folds deployments together; add deployment`;
      if (!inner.by) return `${name}: max without by (deployment) takes one deployment of several`;
    }
  }
  return null;
}

describe("the example Grafana dashboard", () => {
  const dashboard = JSON.parse(readFileSync(join(ROOT, "examples/grafana-dashboard.json"), "utf8")) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const names = deploymentWideNames();

  it("knows the deployment-wide series", () => {
    expect(names).toContain("switchboard_runs_given_up_total");
    expect(names).toContain("bullmq_job_count");
    expect(names.length).toBeGreaterThan(8);
  });

  it("the check itself tells a sum over gateways from a max by deployment", () => {
    const given = "switchboard_runs_given_up_total";
    const sel = `${given}{deployment=~"$deployment"}`;
    expect(sumsAcrossGateways(`sum(increase(${sel}[1h]))`, [given])).toMatch(/with sum/);
    expect(sumsAcrossGateways(`sum(max by (reason) (increase(${sel}[1h])))`, [given])).toMatch(/folds/);
    expect(sumsAcrossGateways(`sum(max by (deployment, reason) (increase(${sel}[1h])))`, [given])).toBeNull();
    expect(sumsAcrossGateways(`sum(max(increase(${sel}[1h])) by (deployment))`, [given])).toBeNull();
    expect(sumsAcrossGateways(`increase(${sel}[1h])`, [given])).toMatch(/not aggregated/);
    expect(sumsAcrossGateways("min(switchboard_storage_healthy)", ["switchboard_storage_healthy"])).toBeNull();
  });

  it("never adds up a deployment-wide series across gateways", () => {
    const problems = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).flatMap((t) => {
        const why = sumsAcrossGateways(t.expr, names);
        return why ? [`${p.title}: ${why}`] : [];
      }),
    );
    expect(problems).toEqual([]);
  });
});
