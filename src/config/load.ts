/**
 * Finding and reading the config file: `--config FILE`, else $SWITCHBOARD_CONFIG, else
 * ~/.switchboard/switchboard.json5; no file means all defaults. Environment overrides are
 * applied before validation so they are checked like everything else.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { resolve } from "node:path";
import JSON5 from "json5";
import { ConfigError, type ConfigIssue } from "../errors/index.js";
import { parseConfig } from "./parse.js";
import type { Config } from "./schema.js";
import { unusedKeyWarnings } from "./unused-keys.js";
import { displayRedisUrl } from "./redis-url.js";

export interface LoadedConfig {
  config: Config;
  /** The file read, if any. */
  path: string | undefined;
  /** True when a Redis URL was given by file or env: then `start` never embeds its own. */
  redisExplicit: boolean;
  /** Known-but-unused keys present in the file, as `path: why` (shown once at start-up). */
  warnings: string[];
}

export function expandHome(p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return resolve(p);
}

export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.SWITCHBOARD_CONFIG ? expandHome(env.SWITCHBOARD_CONFIG) : expandHome("~/.switchboard/switchboard.json5");
}

export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError([{ path: "(file)", message: `cannot read ${path}: ${(err as Error).message}` }], path);
  }
  try {
    const parsed: unknown = JSON5.parse(text);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new ConfigError([{ path: "(root)", message: "must be an object" }], path);
    }
    return parsed as Record<string, unknown>;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const e = err as Error & { lineNumber?: number; columnNumber?: number };
    const at = e.lineNumber ? `line ${e.lineNumber}, column ${e.columnNumber}` : "(file)";
    throw new ConfigError([{ path: at, message: `JSON5 syntax: ${e.message}` }], path);
  }
}

function setIn(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let cur = obj;
  for (const key of path.slice(0, -1)) {
    const next = cur[key];
    if (next === null || typeof next !== "object") cur[key] = {};
    cur = cur[key] as Record<string, unknown>;
  }
  cur[path[path.length - 1]!] = value;
}

/** Environment variables that override a config path (applied before validation). */
export const ENV_OVERRIDES = [
  { env: "REDIS_URL", path: ["redis", "url"] },
  { env: "SWITCHBOARD_STATE_DIR", path: ["storage", "dir"] },
  { env: "SWITCHBOARD_PORT", path: ["gateway", "port"] },
  { env: "SWITCHBOARD_TOKEN", path: ["gateway", "auth", "token"] },
] as const;

export function applyEnvOverrides(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const o of ENV_OVERRIDES) {
    const value = env[o.env];
    if (!value) continue;
    // A port is a number in the file; from the environment it is text that must read as one.
    setIn(out, [...o.path], o.env === "SWITCHBOARD_PORT" && /^\s*\d+\s*$/.test(value) ? Number(value) : value);
  }
  return out;
}

/**
 * A problem with a value that came from the environment is reported under the variable's name
 * (`SWITCHBOARD_PORT: …`), not under a config path the file may not even contain.
 */
export function blameEnvironment(issues: ConfigIssue[], env: NodeJS.ProcessEnv): ConfigIssue[] {
  return issues.map((i) => {
    const o = ENV_OVERRIDES.find((x) => env[x.env] && i.path === x.path.join("."));
    if (!o) return i;
    const value = env[o.env] as string;
    const shown =
      o.env === "SWITCHBOARD_TOKEN"
        ? "(hidden)"
        : JSON.stringify(o.env === "REDIS_URL" ? displayRedisUrl(value) : value);
    const message = o.env === "SWITCHBOARD_PORT" ? "must be a port number 0-65535" : i.message;
    return { path: o.env, message: `${message} (got ${shown}; it sets ${i.path})` };
  });
}

export function loadConfig(opts: { file?: string; env?: NodeJS.ProcessEnv } = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const path = opts.file ? expandHome(opts.file) : defaultConfigPath(env);
  const explicitFile = Boolean(opts.file || env.SWITCHBOARD_CONFIG);
  let raw: Record<string, unknown> = {};
  if (existsSync(path)) raw = readConfigFile(path);
  else if (explicitFile) throw new ConfigError([{ path: "(file)", message: `not found: ${path}` }], path);
  const redisExplicit = Boolean(env.REDIS_URL) || Boolean((raw.redis as Record<string, unknown> | undefined)?.url);
  const source = existsSync(path) ? path : undefined;
  let config: Config;
  try {
    config = parseConfig(applyEnvOverrides(raw, env), source);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(blameEnvironment(err.issues, env), source);
    throw err;
  }
  config.storage.dir = expandHome(config.storage.dir);
  return { config, path: existsSync(path) ? path : undefined, redisExplicit, warnings: unusedKeyWarnings(raw) };
}
