/**
 * Which OpenClaw state dir to import when none is given: the directory of `session.store` in
 * OpenClaw's own config when it sets one, else `$OPENCLAW_STATE_DIR`, else `~/.openclaw`
 * (or `~/.clawdbot` on installs that were never renamed).
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve, sep } from "node:path";
import JSON5 from "json5";

function expand(p: string, env: NodeJS.ProcessEnv): string {
  const home = env.HOME || homedir();
  if (p === "~") return home;
  if (p.startsWith("~/")) return resolve(home, p.slice(2));
  return resolve(p);
}

/**
 * The state dir a `session.store` path lives in: the part before `agents/` for the per-agent
 * layout (`~/.openclaw/agents/{agentId}/sessions/sessions.json`), else the store's directory
 * (a fixed store, whose `sessions.json` the import then reads directly).
 */
export function stateDirOfStore(store: string, env: NodeJS.ProcessEnv = process.env): string {
  const path = expand(store.trim(), env);
  const parts = path.split(sep);
  const agentsAt = parts.lastIndexOf("agents");
  if (agentsAt > 0 && parts.slice(agentsAt).some((p) => p.includes("{agentId}")))
    return parts.slice(0, agentsAt).join(sep) || sep;
  const templated = parts.findIndex((p) => p.includes("{agentId}"));
  return templated > 0 ? parts.slice(0, templated).join(sep) || sep : dirname(path);
}

/** `session.store` from OpenClaw's config file, if the file exists and sets it. */
function configuredStore(env: NodeJS.ProcessEnv, baseDir: string): string | undefined {
  const file = env.OPENCLAW_CONFIG_PATH ? expand(env.OPENCLAW_CONFIG_PATH, env) : join(baseDir, "openclaw.json");
  try {
    const cfg = JSON5.parse(readFileSync(file, "utf8")) as { session?: { store?: unknown } };
    const store = cfg?.session?.store;
    return typeof store === "string" && store.trim() !== "" ? store : undefined;
  } catch {
    return undefined;
  }
}

export function resolveOpenClawStateDir(arg: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (arg) return expand(arg, env);
  let base = env.OPENCLAW_STATE_DIR ? expand(env.OPENCLAW_STATE_DIR, env) : expand("~/.openclaw", env);
  if (!env.OPENCLAW_STATE_DIR && !existsSync(base) && existsSync(expand("~/.clawdbot", env)))
    base = expand("~/.clawdbot", env);
  const store = configuredStore(env, base);
  return store ? stateDirOfStore(store, env) : base;
}
