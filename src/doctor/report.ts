/**
 * `switchboard doctor`'s findings and verdict. Pure: the checks gather, this judges and prints.
 * Healthy means no check failed; warnings are worth reading but do not stop anything.
 */
export type CheckLevel = "ok" | "warn" | "fail" | "skip";

export interface Finding {
  check: string;
  level: CheckLevel;
  message: string;
  /** What to do about it (failures and warnings). */
  fix?: string;
}

export interface Verdict {
  healthy: boolean;
  failures: Finding[];
  warnings: Finding[];
}

export function verdict(findings: Finding[]): Verdict {
  const failures = findings.filter((f) => f.level === "fail");
  return { healthy: failures.length === 0, failures, warnings: findings.filter((f) => f.level === "warn") };
}

const LABEL: Record<CheckLevel, string> = { ok: "ok", warn: "warn", fail: "FAIL", skip: "skip" };

export function formatReport(findings: Finding[]): string {
  const width = Math.max(...findings.map((f) => f.check.length));
  const lines = findings.map((f) => {
    const head = `${LABEL[f.level].padEnd(4)}  ${f.check.padEnd(width)}  ${f.message}`;
    return f.fix && f.level !== "ok" ? `${head}\n${" ".repeat(8 + width)}→ ${f.fix}` : head;
  });
  const v = verdict(findings);
  const tail = v.healthy
    ? `healthy${v.warnings.length ? ` (${v.warnings.length} warning${v.warnings.length === 1 ? "" : "s"})` : ""}`
    : `unhealthy: ${v.failures.map((f) => `${f.check}: ${f.message}`).join("; ")}`;
  return `${lines.join("\n")}\n${tail}\n`;
}
