/**
 * Finding and reading the config file: `--config FILE`, else $SWITCHBOARD_CONFIG, else
 * ~/.switchboard/switchboard.json5; no file means all defaults. Environment overrides are
 * applied before validation so they are checked like everything else.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, resolve } from "node:path";
import JSON5 from "json5";
import { ConfigError, type ConfigIssue } from "../errors/index.js";
import { parseConfig } from "./parse.js";
import type { Config } from "./schema.js";
import { unusedKeyWarnings } from "./unused-keys.js";
import { displayRedisUrl } from "./redis-url.js";
import { defaultAgentId } from "./agents.js";

export interface LoadedConfig {
  config: Config;
  /** The file read, if any. */
  path: string | undefined;
  /** True when a Redis URL was given by file or env: then `start` never embeds its own. */
  redisExplicit: boolean;
  /** Known-but-unused keys present in the file, as `path: why` (shown once at start-up). */
  warnings: string[];
  /**
   * Valid settings that cannot work in this process's environment (an openai runtime's
   * `apiKeyEnv` unset), as `path: why`. Shown by processes that run turns, `doctor` and
   * `config validate`; not by a gateway alone, which never calls a runtime.
   */
  environmentWarnings: string[];
}

/**
 * Every openai runtime whose `apiKeyEnv` names a variable unset (or empty) here: the config is
 * valid and the process starts, but each of that agent's turns fails (runtimes/openai.ts).
 */
function missingApiKeyWarnings(config: Config, env: NodeJS.ProcessEnv): string[] {
  const unset = (name: string | undefined): name is string => name !== undefined && !env[name];
  const out: string[] = [];
  const def = config.agents.defaults.runtime;
  if (def.kind === "openai" && unset(def.apiKeyEnv)) {
    const list = config.agents.list;
    const users = list.length === 0 ? [defaultAgentId(config)] : list.filter((a) => !a.runtime).map((a) => a.id);
    const who = users.length
      ? `agent${users.length === 1 ? "" : "s"} ${users.map((id) => `"${id}"`).join(", ")}`
      : "any agent without its own runtime";
    out.push(
      `agents.defaults.runtime.apiKeyEnv: ${def.apiKeyEnv} is not set in this process's environment; ` +
        `turns of ${who} will fail`,
    );
  }
  config.agents.list.forEach((a, i) => {
    if (a.runtime?.kind === "openai" && unset(a.runtime.apiKeyEnv))
      out.push(
        `agents.list[${i}].runtime.apiKeyEnv: ${a.runtime.apiKeyEnv} is not set in this process's environment; ` +
          `turns of agent "${a.id}" will fail`,
      );
  });
  return out;
}

export function expandHome(p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return resolve(p);
}

/**
 * `storage.dir` made absolute. Resolved against the working directory, one config file would
 * give processes started from different directories different state dirs (transcripts split
 * between them, history looking lost), so a relative path in a config file is relative to that
 * file, and a relative SWITCHBOARD_STATE_DIR (which has no file to be relative to) is refused.
 */
function resolveStorageDir(dir: string, env: NodeJS.ProcessEnv, file: string | undefined): string {
  if (dir === "~" || dir.startsWith("~/") || isAbsolute(dir)) return expandHome(dir);
  if (env.SWITCHBOARD_STATE_DIR) {
    throw new ConfigError(
      [
        {
          path: "SWITCHBOARD_STATE_DIR",
          message: `must be an absolute path or start with ~/ (got ${JSON.stringify(dir)}; it sets storage.dir)`,
        },
      ],
      file,
    );
  }
  // Without a file the default (~/.switchboard) applies, so a relative dir always has a file here.
  return resolve(file ? dirname(file) : process.cwd(), dir);
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
 * (`SWITCHBOARD_PORT: …`), not under a config path the file may not even contain; one with the
 * token given as `--token` under `--token`, which overrides both.
 */
export function blameEnvironment(issues: ConfigIssue[], env: NodeJS.ProcessEnv, tokenFlag = false): ConfigIssue[] {
  return issues.map((i) => {
    if (tokenFlag && i.path === TOKEN_PATH.join("."))
      return { path: "--token", message: `${i.message} (got (hidden); it sets ${i.path})` };
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

const TOKEN_PATH = ["gateway", "auth", "token"];

/**
 * `token`: the global `--token` of `start`, `gateway` and `worker`, the gateway's token as
 * SWITCHBOARD_TOKEN sets it (validated the same way), over it and over the file.
 */
export function loadConfig(opts: { file?: string; env?: NodeJS.ProcessEnv; token?: string } = {}): LoadedConfig {
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
    const input = applyEnvOverrides(raw, env);
    if (opts.token !== undefined) setIn(input, TOKEN_PATH, opts.token);
    config = parseConfig(input, source);
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ConfigError(blameEnvironment(err.issues, env, opts.token !== undefined), source);
    throw err;
  }
  config.storage.dir = resolveStorageDir(config.storage.dir, env, source);
  return {
    config,
    path: existsSync(path) ? path : undefined,
    redisExplicit,
    warnings: unusedKeyWarnings(raw),
    environmentWarnings: missingApiKeyWarnings(config, env),
  };
}
