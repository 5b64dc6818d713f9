/**
 * Run statuses, defined once for TypeScript and Lua: a run is `queued`, then `running`, then
 * ends in one of the terminal statuses and never changes again. The Lua scripts that must tell
 * a finished run from a live one get TERMINAL_STATUSES through `--@include run-status`
 * (src/storage/lua-script.ts generates that include from this list), so the two cannot drift.
 */
export const TERMINAL_STATUSES = ["ok", "error", "timeout", "killed"] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
export type RunStatus = "queued" | "running" | TerminalStatus;

export function isTerminal(status: string | undefined): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status ?? "");
}

/** The `run-status` Lua include: `is_terminal(status)`, true for exactly TERMINAL_STATUSES. */
export function runStatusLua(): string {
  const entries = TERMINAL_STATUSES.map((s) => `[${JSON.stringify(s)}] = true`).join(", ");
  return [
    "-- Generated from TERMINAL_STATUSES (src/runs/run-status.ts): the statuses a run ends in.",
    `local TERMINAL_STATUS = { ${entries} }`,
    "-- HGET of a missing field gives false: not terminal.",
    "local function is_terminal(status) return TERMINAL_STATUS[status] == true end",
  ].join("\n");
}
