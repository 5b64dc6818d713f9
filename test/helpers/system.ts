/**
 * System-level test harness: a whole Switchboard (gateway + workers) in this process, or real
 * worker/gateway OS processes started from a config file, exactly as operators run them.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import type { Config, ConfigInput } from "../../src/config/index.js";
import { startSystem, type SwitchboardSystem, type SystemOptions } from "../../src/app/system.js";
import { tempDir, testConfig } from "./context.js";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const CLI = join(ROOT, "dist/src/cli/main.js");

/** Fast failure detection for crash tests: a dead worker's job and lease expire in ~2 s. */
export const FAST_WORKERS = { lockDurationMs: 2000, stalledIntervalMs: 1000 };

export interface TestSystem extends SwitchboardSystem {
  config: Config;
  url: string;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  get(path: string, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  rpc(method: string, params?: unknown): Promise<any>;
}

export async function httpJson(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (metrics, board HTML)
  }
  return { status: res.status, body: parsed };
}

function withHttp(sys: SwitchboardSystem, config: Config): TestSystem {
  const url = sys.url!;
  const auth: Record<string, string> = config.gateway.auth.token
    ? { authorization: `Bearer ${config.gateway.auth.token}` }
    : {};
  return Object.assign(sys, {
    config,
    url,
    post: (path: string, body: unknown, headers: Record<string, string> = auth) =>
      httpJson("POST", url + path, body, headers),
    get: (path: string, headers: Record<string, string> = auth) => httpJson("GET", url + path, undefined, headers),
    rpc: async (method: string, params: unknown = {}) => {
      const r = await httpJson("POST", `${url}/v1/rpc/${method}`, params, auth);
      if (r.status !== 200 || !r.body.ok)
        throw new Error(`rpc ${method} failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.result;
    },
  }) as TestSystem;
}

/** Gateway (port 0) + workers in this process, on a fresh prefix and storage dir. */
export async function startTestSystem(
  overrides: ConfigInput = {},
  opts: SystemOptions = { gateway: true, workers: {} },
): Promise<TestSystem> {
  const config = testConfig({ ...overrides, gateway: { port: 0, ...(overrides.gateway ?? {}) } });
  const sys = await startSystem(config, { logger: false, ...opts });
  return withHttp(sys, config);
}

/** Attach another gateway (or workers) to the same deployment (same prefix, storage, Redis). */
export async function startPeer(config: Config, opts: SystemOptions): Promise<TestSystem> {
  const peer = structuredClone(config);
  peer.gateway.port = 0;
  const sys = await startSystem(peer, { logger: false, ...opts });
  return opts.gateway ? withHttp(sys, peer) : (Object.assign(sys, { config: peer }) as TestSystem);
}

/** Write `config` as a JSON5 file for child processes. */
export function writeConfigFile(config: Config): string {
  const { dir } = tempDir("sb-cfg");
  const file = join(dir, "switchboard.json5");
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

export interface ChildHandle {
  child: ChildProcess;
  output(): string;
  /** SIGKILL: no cleanup, no lock release: a real crash. */
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

/** Run `switchboard <args>` as a real process; resolves once it printed "ready". */
export async function spawnSwitchboard(
  args: string[],
  env: Record<string, string> = {},
  readyTimeoutMs = 20_000,
  as: { uid?: number; gid?: number } = {},
): Promise<ChildHandle> {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    ...as,
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + readyTimeoutMs;
  while (!/ready/.test(out)) {
    if (child.exitCode !== null)
      throw new Error(`switchboard ${args.join(" ")} exited early (${child.exitCode}):\n${out}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`switchboard ${args.join(" ")} not ready in ${readyTimeoutMs} ms:\n${out}`);
    }
    await sleep(50);
  }
  return {
    child,
    output: () => out,
    async kill9() {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, sleep(15_000).then(() => child.kill("SIGKILL"))]);
      await exited;
    },
  };
}
