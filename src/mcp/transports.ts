/**
 * How an MCP client reaches the session server: stdio (the client starts `switchboard mcp` as
 * a child process; stdout carries nothing but protocol) or streamable HTTP on `/mcp` (one
 * long-running process, one MCP session and server per client, keyed by `Mcp-Session-Id`).
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import { tokenAccepted } from "../auth/credentials.js";
import { nonLocalRequestReason } from "../auth/local-request.js";
import { PayloadTooLargeError, REDIS_UNAVAILABLE_MESSAGE, isRedisDown } from "../errors/index.js";

export type McpServerFactory = () => Promise<McpServer>;

export interface RunningTransport {
  /** `stdio`, or the URL of the HTTP endpoint. */
  describe: string;
  /** Resolves when the client went away (stdio: stdin ended); never for HTTP. */
  done: Promise<void>;
  close(): Promise<void>;
}

export async function serveStdio(factory: McpServerFactory): Promise<RunningTransport> {
  // Anything printed to stdout would corrupt the protocol stream: send stray console output
  // (from libraries) to stderr, where the logs go.
  console.log = console.error;
  console.info = console.error;
  console.debug = console.error;
  const server = await factory();
  await server.connect(new StdioServerTransport());
  const done = new Promise<void>((resolve) => {
    process.stdin.once("end", resolve);
    process.stdin.once("close", resolve);
  });
  return { describe: "stdio", done, close: () => server.close() };
}

export interface HttpOptions {
  host: string;
  port: number;
  /**
   * When set, every request must carry it (Bearer, or Basic password), as at the gateway. When
   * not (loopback only), requests with a foreign Host or Origin are refused, as at the gateway:
   * the DNS-rebinding protection the MCP specification asks of local servers.
   */
  token?: string;
  log: Logger;
  /** Idle time after which a session is closed (default MCP_SESSION_IDLE_MS). */
  idleMs?: number;
  /** Most sessions open at once (default MCP_MAX_SESSIONS). */
  maxSessions?: number;
  /**
   * The gateway's request body limit and message limit (docs/concepts/limits.md): a larger POST
   * body is refused with 413 and `payload_too_large`, as at the gateway's doors.
   */
  limits: { bodyBytes: number; messageBytes: number };
}

export const MCP_PATH = "/mcp";
class BodyTooLarge extends Error {}

function jsonRpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  extraHeaders: Record<string, string> = {},
  data?: Record<string, unknown>,
): void {
  res.writeHead(status, { "content-type": "application/json", ...extraHeaders });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message, ...(data ? { data } : {}) }, id: null }));
}

/** The body as JSON; BodyTooLarge as soon as it is known to exceed `limit` (declared or read). */
async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  if (Number(req.headers["content-length"] ?? 0) > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * 413 in JSON-RPC's shape, carrying the gateway's error (code, limits). The rest of the body is
 * read and dropped, so the client, still sending, gets the answer instead of a reset connection.
 */
function bodyTooLarge(req: IncomingMessage, res: ServerResponse, limits: HttpOptions["limits"]): void {
  const err = new PayloadTooLargeError({ limitBytes: limits.messageBytes, bodyLimitBytes: limits.bodyBytes });
  jsonRpcError(res, 413, -32600, err.message, { connection: "close" }, { code: err.code, ...(err.details ?? {}) });
  req.resume();
}

/** The ids of the JSON-RPC requests in a POST body (one message or a batch). */
function requestIds(body: unknown): Array<string | number> {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  const ids: Array<string | number> = [];
  for (const m of messages) {
    const msg = m as { method?: unknown; id?: unknown } | null;
    if (msg && typeof msg.method === "string" && (typeof msg.id === "string" || typeof msg.id === "number"))
      ids.push(msg.id);
  }
  return ids;
}

/**
 * A client whose HTTP connection drops before its answers are out has gone: its calls are
 * cancelled as if it had sent `notifications/cancelled`, so a waiting `sessions_send` lets go of
 * its wait (timer, run-done subscription, Redis reads) at once instead of when the run ends; what
 * the call started goes on. The SDK's transport only forgets the stream. A complete answer ends
 * the response first (`writableEnded`), and its 'close' cancels nothing.
 */
function cancelOnDisconnect(
  res: ServerResponse,
  transport: StreamableHTTPServerTransport,
  ids: Array<string | number>,
): void {
  if (ids.length === 0) return;
  res.once("close", () => {
    if (res.writableEnded) return;
    for (const requestId of ids) {
      transport.onmessage?.({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId, reason: "the client's HTTP connection closed" },
      });
    }
  });
}

/** An MCP HTTP session unused this long is closed (a client that never sent DELETE). */
export const MCP_SESSION_IDLE_MS = 30 * 60_000;
/** At most this many open at once: beyond, the one unused longest is closed. */
export const MCP_MAX_SESSIONS = 1000;

interface HttpSession {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  lastUse: number;
}

export async function serveHttp(factory: McpServerFactory, opts: HttpOptions): Promise<RunningTransport> {
  // Insertion order is use order: a session is moved to the end each time it is used.
  const sessions = new Map<string, HttpSession>();
  const idleMs = opts.idleMs ?? MCP_SESSION_IDLE_MS;
  const maxSessions = opts.maxSessions ?? MCP_MAX_SESSIONS;
  const evict = (now: number) => {
    for (const [id, s] of sessions) {
      if (sessions.size <= maxSessions && now - s.lastUse < idleMs) break;
      sessions.delete(id);
      void s.transport.close().catch(() => {});
    }
  };
  const sweeper = setInterval(() => evict(Date.now()), Math.min(idleMs, 60_000));
  sweeper.unref();

  const startSession = async (req: IncomingMessage, res: ServerResponse, body: unknown) => {
    const server = await factory();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server, lastUse: Date.now() });
        evict(Date.now());
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      void server.close().catch(() => {});
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0];
    // Before anything else (sessions, body): a page of another site must learn nothing here. The
    // SDK's own enableDnsRebindingProtection is deprecated (in favour of middleware in front of
    // the transport), compares Host including its port, and only runs inside a session's transport.
    const foreign = opts.token ? undefined : nonLocalRequestReason(req.headers);
    if (foreign) return jsonRpcError(res, 403, -32000, foreign);
    if (path !== MCP_PATH) return jsonRpcError(res, 404, -32601, `not found: MCP is served at ${MCP_PATH}`);
    if (opts.token && !tokenAccepted(req.headers.authorization, opts.token)) {
      return jsonRpcError(res, 401, -32001, "missing or wrong bearer token", {
        "www-authenticate": 'Bearer realm="switchboard"',
      });
    }
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    const session = sessionId ? sessions.get(sessionId) : undefined;
    if (sessionId && !session)
      return jsonRpcError(res, 404, -32001, `unknown MCP session ${sessionId} (start a new one with initialize)`);
    if (sessionId && session) {
      session.lastUse = Date.now();
      sessions.delete(sessionId);
      sessions.set(sessionId, session);
    }
    if (req.method !== "POST") {
      if (!session) return jsonRpcError(res, 400, -32000, "Mcp-Session-Id header required");
      return await session.transport.handleRequest(req, res);
    }
    let body: unknown;
    try {
      body = await readJson(req, opts.limits.bodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) return bodyTooLarge(req, res, opts.limits);
      return jsonRpcError(res, 400, -32700, `parse error: ${(err as Error).message}`);
    }
    if (session) {
      cancelOnDisconnect(res, session.transport, requestIds(body));
      return await session.transport.handleRequest(req, res, body);
    }
    if (!isInitializeRequest(body))
      return jsonRpcError(res, 400, -32000, "no MCP session: send initialize first (without Mcp-Session-Id)");
    await startSession(req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      // Redis away (starting a session reads the caller's entry) is a 503 to retry, as at every door.
      const down = isRedisDown(err);
      if (down) opts.log.warn({ err: (err as Error).message }, "mcp http request: Redis is unavailable");
      else opts.log.error({ err }, "mcp http request failed");
      if (res.headersSent) res.end();
      else if (down) jsonRpcError(res, 503, -32000, REDIS_UNAVAILABLE_MESSAGE, { "retry-after": "1" });
      else jsonRpcError(res, 500, -32603, "internal error");
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(opts.port, opts.host, () => {
      http.off("error", reject);
      resolve();
    });
  });
  const { port } = http.address() as AddressInfo;
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    describe: `http://${host}:${port}${MCP_PATH}`,
    done: new Promise<void>(() => {}),
    async close() {
      clearInterval(sweeper);
      await Promise.allSettled([...sessions.values()].map(({ transport }) => transport.close()));
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
