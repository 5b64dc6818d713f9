/**
 * `switchboard mcp --session <key> [--http <port>]`: the session tools over the Model Context
 * Protocol, acting as one session. Talks to Redis directly (no gateway needed); runs go to
 * whatever workers consume the deployment's queues. In stdio mode stdout is the protocol
 * stream: logs and the ready line go to stderr.
 */
import { createLogger } from "../../app/logger.js";
import { packageVersion } from "../../deployment/package-version.js";
import { redisAnswers } from "../../app/embedded-redis.js";
import { createServices } from "../../app/services.js";
import { ValidationError } from "../../errors/index.js";
import { createSessionMcpServer } from "../../mcp/server.js";
import { serveHttp, serveStdio, type RunningTransport } from "../../mcp/transports.js";
import { requestBodyLimit } from "../../gateway/message-limit.js";
import { canonicalSessionKey } from "../../session/key-canonical.js";
import { createToolRuntime } from "../../tools/tool-runtime.js";
import { resolveCaller } from "../../tools/session-caller.js";
import { cliToken, loadCliConfig, RpcCallError, type GlobalOptions } from "../client.js";
import { checkTokenFlag, tokenProblem, UsageError } from "../flags.js";
import { displayRedisUrl } from "../../config/redis-url.js";

export interface McpOptions extends GlobalOptions {
  session: string;
  http?: string;
  host?: string;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);

function parsePort(raw: string): number {
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--http must be a port number 0-65535 (got ${JSON.stringify(raw)})`);
  return port;
}

export async function mcpCommand(opts: McpOptions): Promise<void> {
  const port = opts.http !== undefined ? parsePort(opts.http) : undefined;
  const host = opts.host ?? "127.0.0.1";
  const { config } = loadCliConfig(opts);
  // The token the CLI would present is the one this server asks for: --token, then
  // SWITCHBOARD_TOKEN, then gateway.auth.token (a --token given and then ignored left it open).
  const token = cliToken(opts, config);
  // A bad --token is a bad flag value (usage); one from the environment or config is not.
  checkTokenFlag(opts.token);
  const why = token === undefined ? undefined : tokenProblem(token);
  if (why) throw new ValidationError(`token: ${why}`);
  // Over HTTP anyone who reaches the port acts as the session: off loopback, require the token.
  if (port !== undefined && !LOOPBACK.has(host) && !token) {
    throw new UsageError(`--host ${host} is not loopback: set gateway.auth.token so MCP clients must present it`);
  }
  canonicalSessionKey(config, opts.session); // a malformed key fails here, before Redis is asked
  if (!(await redisAnswers(config.redis.url))) {
    throw new RpcCallError(
      "redis_unavailable",
      `Redis does not answer at ${displayRedisUrl(config.redis.url)} (start Switchboard or set redis.url)`,
    );
  }
  const log = createLogger("switchboard-mcp");
  const svc = createServices(config, { role: "cli", log });
  // As at every door: a key, or the sessionId of a stored session, names the session acted as.
  const { sessionKey } = await resolveCaller(svc, opts.session);
  const tools = createToolRuntime(svc);
  const factory = () => createSessionMcpServer({ svc, tools, sessionKey, version: packageVersion(), log });

  let transport: RunningTransport;
  try {
    transport =
      port === undefined
        ? await serveStdio(factory)
        : await serveHttp(factory, {
            host,
            port,
            log,
            limits: { bodyBytes: requestBodyLimit(config), messageBytes: config.gateway.limits.messageBytes },
            ...(token ? { token } : {}),
          });
  } catch (err) {
    await svc.close();
    throw err;
  }
  process.stderr.write(
    `switchboard mcp ready: session ${sessionKey} over ${transport.describe} ` +
      `(redis ${displayRedisUrl(config.redis.url)})\n`,
  );

  let closing = false;
  const shutdown = async (reason: string) => {
    if (closing) process.exit(1); // a second signal: exit at once
    closing = true;
    log.info({ reason }, "mcp server shutting down");
    await transport.close().catch((err: unknown) => log.warn({ err }, "closing the MCP transport failed"));
    await svc.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  void transport.done.then(() => shutdown("client disconnected"));
}
