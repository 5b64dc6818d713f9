/** Small formatting helpers: tables for people, JSON for programs. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Rows as a table with aligned columns; numeric columns align right. Cells over 60 wide end in "…". */
export function formatTable(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  const fit = (v: string, w: number) => (v.length > w ? `${v.slice(0, w - 1)}…` : v);
  const numeric = columns.map((c) => rows.length > 0 && rows.every((r) => typeof r[c] === "number"));
  const widths = columns.map((c) => Math.min(60, Math.max(c.length, ...rows.map((r) => cell(r[c]).length))));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => (numeric[i] ? fit(v, widths[i]!).padStart(widths[i]!) : fit(v, widths[i]!).padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const lines = [
    line(columns),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map((r) => line(columns.map((c) => cell(r[c])))),
  ];
  return `${lines.join("\n")}\n`;
}

export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  process.stdout.write(rows.length === 0 ? "(none)\n" : formatTable(rows, columns));
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
      b.type === "text"
        ? (b.text ?? "")
        : b.type === "toolCall"
          ? `[tool ${b.name}]`
          : b.type === "thinking"
            ? ""
            : `[${b.type}]`,
    )
    .filter(Boolean)
    .join("\n");
}
