/** Small formatting helpers: tables for people, JSON for programs. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write("(none)\n");
    return;
  }
  const cell = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  const widths = columns.map((c) => Math.min(60, Math.max(c.length, ...rows.map((r) => cell(r[c]).length))));
  const line = (vals: string[]) => vals.map((v, i) => v.slice(0, widths[i]).padEnd(widths[i]!)).join("  ").trimEnd();
  process.stdout.write(line(columns) + "\n" + line(widths.map((w) => "-".repeat(w))) + "\n");
  for (const r of rows) process.stdout.write(line(columns.map((c) => cell(r[c]))) + "\n");
}

export function ago(ms: number): string {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

/** Text of a transcript message for people: text blocks joined, tool calls named. */
export function messageText(m: { content?: unknown }): string {
  const c = m.content;
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return c
    .map((b: { type?: string; text?: string; name?: string; thinking?: string }) =>
      b.type === "text" ? (b.text ?? "") : b.type === "toolCall" ? `[tool ${b.name}]` : b.type === "thinking" ? "" : `[${b.type}]`,
    )
    .filter(Boolean)
    .join("\n");
}
