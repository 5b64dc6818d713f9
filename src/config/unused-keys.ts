/**
 * Keys Switchboard accepts (so an OpenClaw config starts) but does not act on. They are never
 * ignored silently: `switchboard start|gateway|worker` logs them once at start-up and
 * `switchboard config validate` prints them as warnings. Pure: looks only at the raw input.
 */

/**
 * path (dots) → why nothing happens. `*` stands for any key under that object, `[]` for any entry
 * of that list.
 */
const UNUSED: Record<string, string> = {
  "session.store": "accepted: used as the default source of `switchboard import openclaw`; sessions live in Redis",
  "session.parentForkMaxTokens": "accepted, not acted on: thread sessions do not fork their parent transcript",
  "session.maintenance.rotateBytes": "accepted, not acted on: there is no sessions.json to rotate",
  "session.maintenance.maxDiskBytes": "accepted, not acted on: no disk budget is enforced",
  "session.maintenance.highWaterBytes": "accepted, not acted on: no disk budget is enforced",
  "commands.*": "accepted, not acted on (only commands.ownerAllowFrom is)",
  "gateway.mode": "accepted, not acted on: a Switchboard gateway is what `switchboard start|gateway` runs",
  "gateway.bind": "accepted, not acted on: the gateway binds gateway.host",
  "agents.defaults.model": "accepted, not acted on: an agent answers through its runtime (agents.defaults.runtime)",
  "agents.defaults.workspace": "accepted, not acted on: Switchboard runs no agent workspaces",
  // The same OpenClaw keys on one agent: accepted and warned about as under agents.defaults.
  "agents.list[].model": "accepted, not acted on: an agent answers through its runtime (agents.list[].runtime)",
  "agents.list[].workspace": "accepted, not acted on: Switchboard runs no agent workspaces",
  models: "accepted, not acted on: model providers are configured per runtime (agents.defaults.runtime)",
};
const ACTED_ON = new Set(["commands.ownerAllowFrom"]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Every key in `raw`: its path as printed (`agents.list[0].model`) and as UNUSED names it (`agents.list[].model`). */
function presentPaths(raw: unknown, prefix = "", pattern = ""): { path: string; pattern: string }[] {
  const out: { path: string; pattern: string }[] = [];
  if (Array.isArray(raw)) {
    for (const [i, v] of raw.entries()) out.push(...presentPaths(v, `${prefix}[${i}]`, `${pattern}[]`));
    return out;
  }
  if (!isObject(raw)) return out;
  for (const [k, v] of Object.entries(raw)) {
    const path = prefix ? `${prefix}.${k}` : k;
    const named = pattern ? `${pattern}.${k}` : k;
    // Only a key's own path is listed, never a list entry's index alone.
    out.push({ path, pattern: named }, ...presentPaths(v, path, named));
  }
  return out;
}

/** `path: why` for every known-but-unused key present in `raw`, in config order. */
export function unusedKeyWarnings(raw: unknown): string[] {
  const warnings: string[] = [];
  for (const { path, pattern } of presentPaths(raw)) {
    if (ACTED_ON.has(pattern)) continue;
    const exact = UNUSED[pattern];
    const parent = pattern.slice(0, pattern.lastIndexOf("."));
    const wildcard = pattern.includes(".") && parent.split(".").length === 1 ? UNUSED[`${parent}.*`] : undefined;
    const why = exact ?? wildcard;
    if (why) warnings.push(`${path}: ${why}`);
  }
  return warnings;
}
