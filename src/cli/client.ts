/**
 * How the CLI reaches Switchboard: over HTTP to a gateway (`--url`, $SWITCHBOARD_URL, or the
 * one `switchboard start` recorded), else directly against Redis with the very same RPC code.
 * `sessions` and `history` therefore work with no gateway running at all.
 */
import type { Config } from "../config/schema.js";
import { loadConfig, type LoadedConfig } from "../config/load.js";
import { createServices, type Services } from "../app/services.js";
import { readRuntimeInfo } from "../app/runtime-file.js";
import { createRpcMethods } from "../rpc/methods.js";
import { SwitchboardError, isRedisDown, redisFailure, type ErrorCode } from "../errors/index.js";
import { displayRedisUrl } from "../config/redis-url.js";
import { CLI_COMMAND_TIMEOUT_MS, NO_REPLY } from "../queues/redis-connections.js";

export interface GlobalOptions {
  config?: string;
  url?: string;
  token?: string;
}

export interface Client {
  mode: "http" | "direct";
  describe: string;
  rpc(method: string, params?: unknown): Promise<unknown>;
  get(path: string): Promise<unknown>;
  close(): Promise<void>;
  /** Direct mode only: the services (doctor reads queues with them). */
  svc?: Services;
  /**
   * Direct mode only: why `err`, thrown by a Redis command, means Redis does not answer (the
   * connection's own error, e.g. ECONNREFUSED, or a command timeout), or undefined when it does not.
   */
  redisDownCause?(err: unknown): string | undefined;
}

export class RpcCallError extends SwitchboardError {}

/** What to do when Redis does not answer: said wherever the CLI finds out. */
export function redisUnavailable(url: string, cause: string): RpcCallError {
  return new RpcCallError(
    "redis_unavailable",
    `Redis does not answer at ${displayRedisUrl(url)} (${cause}). ` +
      "Start Redis (`redis-server`, or `docker compose up -d redis`), " +
      "or point Switchboard at yours with REDIS_URL or redis.url in the config file (--config); " +
      "`switchboard doctor` checks the setup.",
  );
}

/** What to do when the gateway does not answer at an explicit --url / $SWITCHBOARD_URL. */
export function gatewayUnreachable(base: string, err: unknown): RpcCallError {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  const why = cause?.code ?? cause?.message ?? (err as Error)?.message ?? String(err);
  return new RpcCallError(
    "gateway_unreachable",
    `the gateway does not answer at ${base} (${why}). Start one ` +
      `(\`switchboard start\` or \`switchboard gateway\`) or fix --url / SWITCHBOARD_URL; ` +
      "without --url, sessions, history and status read Redis directly.",
  );
}

/** fetch, with a refused or unresolvable gateway turned into an error that says what to do. */
async function gatewayFetch(base: string, path: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(`${base}${path}`, init);
  } catch (err) {
    throw gatewayUnreachable(base, err);
  }
}

export function httpClient(base: string, token: string | undefined): Client {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    ...(token ? { authorization: `Bearer ${token}` } : {}),
  };
  const parse = async (res: Response) => {
    const body = (await res.json().catch(() => ({}))) as {
      ok?: boolean;
      result?: unknown;
      error?: { code?: string; message?: string };
    };
    if (res.status === 401)
      throw new RpcCallError("unauthorized", "gateway refused the token (set --token or SWITCHBOARD_TOKEN)");
    // The gateway's own code, passed on as it said it (its codes are ErrorCodes).
    if (body.ok === false)
      throw new RpcCallError(
        (body.error?.code ?? "http_error") as ErrorCode,
        body.error?.message ?? `HTTP ${res.status}`,
      );
    if (!res.ok) throw new RpcCallError("http_error", `HTTP ${res.status}`);
    return body;
  };
  return {
    mode: "http",
    describe: base,
    async rpc(method, params) {
      const res = await gatewayFetch(base, `/v1/rpc/${method}`, {
        method: "POST",
        headers,
        body: JSON.stringify(params ?? {}),
      });
      return ((await parse(res)) as { result: unknown }).result;
    },
    async get(path) {
      return await parse(await gatewayFetch(base, path, { headers }));
    },
    async close() {},
  };
}

/** ioredis's error for a command not answered within `commandTimeout` (the CLI's connections). */
function isCommandTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === "Command timed out";
}

export function directClient(config: Config): Client {
  const svc = createServices(config, { role: "cli" });
  // The connection's own error (ECONNREFUSED…) says more than "max retries per request".
  let lastConnectionError: string | undefined;
  svc.redis.on("error", (err: Error) => (lastConnectionError = err.message));
  const redisDownCause = (err: unknown): string | undefined => {
    if (isCommandTimeout(err)) return lastConnectionError ?? `${NO_REPLY} within ${CLI_COMMAND_TIMEOUT_MS / 1000} s`;
    return isRedisDown(err) ? (lastConnectionError ?? (err as Error).message) : undefined;
  };
  let rpc: ReturnType<typeof createRpcMethods> | undefined;
  const methods = () => {
    if (!rpc) rpc = createRpcMethods(svc);
    return rpc;
  };
  return {
    mode: "direct",
    describe: displayRedisUrl(config.redis.url),
    svc,
    redisDownCause,
    async rpc(method, params) {
      const h = methods()[method];
      if (!h) throw new RpcCallError("not_found", `unknown method ${method}`);
      try {
        return await h(params ?? {});
      } catch (err) {
        const cause = redisDownCause(err);
        if (cause !== undefined) throw redisUnavailable(config.redis.url, cause);
        // Redis at its maxmemory: what to do, not its raw reply (script hashes and lines).
        const failure = redisFailure(err);
        if (failure?.code === "redis_full") throw new RpcCallError("redis_full", failure.message);
        throw err;
      }
    },
    async get(path) {
      const m = /^\/v1\/runs\/(.+)$/.exec(path);
      if (m) return await svc.runs.get(decodeURIComponent(m[1]!));
      throw new RpcCallError("not_found", `not available without a gateway: ${path}`);
    },
    async close() {
      // BullMQ's Queue checks the Redis version (INFO) once connected, used or not; quitting before
      // that made it write to a closed socket (a "write EPIPE" warning on stderr). Let it finish.
      // Not when Redis does not answer: there is no check to finish, and nothing to write to.
      if (svc.redis.status === "ready") {
        let timer: NodeJS.Timeout | undefined;
        const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, 1000)));
        await Promise.race([Promise.allSettled(Object.values(svc.queues).map((q) => q.waitUntilReady())), bound]);
        clearTimeout(timer);
      }
      await svc.close();
    },
  };
}

/** Whether a gateway answers GET /healthz at `base` within a short timeout. */
export async function reachable(base: string, timeoutMs = 1000): Promise<boolean> {
  try {
    const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok;
  } catch {
    return false;
  }
}

export function loadCliConfig(opts: GlobalOptions): LoadedConfig {
  const loaded = loadConfig(opts.config ? { file: opts.config } : {});
  const runtime = readRuntimeInfo(loaded.config.storage.dir);
  // An embedded Redis of a running `switchboard start` wins over the default URL.
  if (!loaded.redisExplicit && runtime) loaded.config.redis.url = runtime.redisUrl;
  return loaded;
}

/** The gateway token the CLI presents: --token, $SWITCHBOARD_TOKEN, else the config's. */
export function cliToken(opts: GlobalOptions, config: Config): string | undefined {
  return opts.token ?? process.env.SWITCHBOARD_TOKEN ?? config.gateway.auth.token;
}

/** The gateway named explicitly (--url, $SWITCHBOARD_URL), without a trailing slash. */
export function explicitGatewayUrl(opts: GlobalOptions): string | undefined {
  return (opts.url ?? process.env.SWITCHBOARD_URL)?.replace(/\/$/, "");
}

/**
 * Where the CLI looks for a gateway when none is named: the one `switchboard start` recorded,
 * then where the config says one listens (not port 0, which names no port).
 */
export function gatewayCandidates(config: Config): string[] {
  const host = config.gateway.host === "0.0.0.0" ? "127.0.0.1" : config.gateway.host;
  return [
    readRuntimeInfo(config.storage.dir)?.gatewayUrl,
    config.gateway.port ? `http://${host}:${config.gateway.port}` : undefined,
  ].filter((u): u is string => Boolean(u));
}

export async function connect(opts: GlobalOptions, prefer: "http" | "direct" = "http"): Promise<Client> {
  const { config } = loadCliConfig(opts);
  const token = cliToken(opts, config);
  const explicitUrl = explicitGatewayUrl(opts);
  if (explicitUrl) return httpClient(explicitUrl, token);
  if (prefer === "http") {
    for (const base of gatewayCandidates(config)) if (await reachable(base)) return httpClient(base, token);
  }
  return directClient(config);
}
