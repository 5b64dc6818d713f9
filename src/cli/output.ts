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
  process.stdout.write(rows.length === 0 ? "(none)\n" : terminalSafe(formatTable(rows, columns)));
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
  // Any JSON may sit in a line this process did not write: an odd block is shown as one, not fatal.
  return (c as unknown[])
    .map((raw) => {
      if (!raw || typeof raw !== "object") return "[block]";
      const b = raw as { type?: unknown; text?: unknown; name?: unknown };
      if (b.type === "text") return typeof b.text === "string" ? b.text : "";
      if (b.type === "toolCall") return `[tool ${typeof b.name === "string" ? b.name : "?"}]`;
      if (b.type === "thinking") return "";
      return typeof b.type === "string" ? `[${b.type}]` : "[block]";
    })
    .filter(Boolean)
    .join("\n");
}

/**
 * Text from a chat, made safe to print on a terminal: control characters (but newline and tab)
 * and bidi controls are shown as `\u{…}` escapes. Anyone who can message a channel writes this
 * text; printed raw, escape sequences would retitle, clear or rewrite the operator's terminal.
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\p{Cc}\p{Bidi_Control}]/gu, (ch) =>
    ch === "\n" || ch === "\t" ? ch : `\\u{${ch.codePointAt(0)!.toString(16)}}`,
  );
}

/**
 * The CLI's exit codes (README "Exit codes"). Scripts branch on them: a usage error is not worth
 * retrying, a send whose outcome is unknown must not be sent again.
 */
export const EXIT = {
  ok: 0,
  /** Any error: Redis or the gateway does not answer, a refused request, an unhealthy doctor. */
  error: 1,
  /** `send --wait`: the run ended but not ok (error, aborted) or the wait timed out. */
  notOk: 2,
  /** `send --wait`: the message was queued (its runId printed), then the wait failed: outcome unknown. */
  unknown: 3,
  /** A command line the CLI refuses: unknown command or flag, bad flag value, missing argument. */
  usage: 64,
  /** Interrupted by Ctrl-C (SIGINT); 143 for SIGTERM. */
  interrupted: 130,
} as const;

/** `{"ok":false,"error":{"code","message"}}`, what `--json` prints on stdout for any error. */
export function jsonError(code: string, message: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ok: false, ...extra, error: { code, message } };
}
