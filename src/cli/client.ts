/**
 * How the CLI reaches Switchboard: over HTTP to a gateway (`--url`, $SWITCHBOARD_URL, or the
 * one `switchboard start` recorded), else directly against Redis with the very same RPC code.
 * `sessions` and `history` therefore work with no gateway running at all.
 */
import type { Config } from "../config/schema.js";
import { loadConfig, type LoadedConfig } from "../config/load.js";
import { readRuntimeInfo } from "../app/runtime-file.js";
import type { ErrorCode } from "../errors/index.js";
import { type Client, RpcCallError } from "./client-base.js";

export { type Client, RpcCallError, redisUnavailable } from "./client-base.js";

export interface GlobalOptions {
  config?: string;
  url?: string;
  token?: string;
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

/**
 * What a command asks of a direct client: `read`, only the read methods (rpc/read-methods.ts),
 * which start without loading BullMQ; `all`, every method.
 */
export type DirectScope = "read" | "all";

/** A direct client, its modules loaded only now: a command that reaches a gateway never loads them. */
export async function directClientFor(config: Config, scope: DirectScope = "all"): Promise<Client> {
  const direct = await import("./direct-client.js");
  return scope === "read" ? direct.readClient(config) : direct.directClient(config);
}

export async function connect(
  opts: GlobalOptions,
  prefer: "http" | "direct" = "http",
  scope: DirectScope = "all",
): Promise<Client> {
  const { config } = loadCliConfig(opts);
  const token = cliToken(opts, config);
  const explicitUrl = explicitGatewayUrl(opts);
  if (explicitUrl) return httpClient(explicitUrl, token);
  if (prefer === "http") {
    for (const base of gatewayCandidates(config)) if (await reachable(base)) return httpClient(base, token);
  }
  return await directClientFor(config, scope);
}
