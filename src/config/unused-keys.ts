/**
 * Keys Switchboard accepts (so an OpenClaw config starts) but does not act on. They are never
 * ignored silently: `switchboard start|gateway|worker` logs them once at start-up and
 * `switchboard config validate` prints them as warnings. Pure: looks only at the raw input.
 */

/** path (dots) → why nothing happens. `*` stands for any key under that object. */
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
  models: "accepted, not acted on: model providers are configured per runtime (agents.defaults.runtime)",
};
const ACTED_ON = new Set(["commands.ownerAllowFrom"]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function presentPaths(raw: unknown, prefix = ""): string[] {
  if (!isObject(raw)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(raw)) {
    const path = prefix ? `${prefix}.${k}` : k;
    out.push(path, ...presentPaths(v, path));
  }
  return out;
}

/** `path: why` for every known-but-unused key present in `raw`, in config order. */
export function unusedKeyWarnings(raw: unknown): string[] {
  const warnings: string[] = [];
  for (const path of presentPaths(raw)) {
    if (ACTED_ON.has(path)) continue;
    const exact = UNUSED[path];
    const parent = path.slice(0, path.lastIndexOf("."));
    const wildcard = path.includes(".") && parent.split(".").length === 1 ? UNUSED[`${parent}.*`] : undefined;
    const why = exact ?? wildcard;
    if (why) warnings.push(`${path}: ${why}`);
  }
  return warnings;
}
