/**
 * The HTTP gateway (README "HTTP API"). Stateless: every answer comes from Redis, so any number of
 * gateways can sit behind a load balancer, and `agent.wait` survives reconnects and restarts.
 */
import { clientGoneSignal } from "./client-gone.js";
import type { ToolCallOptions } from "../tools/tool-runtime.js";
import type { Socket } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import type { GatewayDeps } from "./gateway-deps.js";
import { SwitchboardError } from "../errors/index.js";
import { handleInbound } from "../inbound/handle-inbound.js";
import { createRpcMethods, type RpcHandler } from "../rpc/methods.js";
import { createAuthHook } from "./auth.js";
import { registerBullBoard } from "./bull-board.js";
import { httpErrorHandler } from "./http-errors.js";
import { registerMetrics } from "./metrics.js";
import { registerMessageLimit, requestBodyLimit } from "./message-limit.js";
import { registerOpenAiDoor } from "./openai-door/index.js";
import { registerApiDocs } from "./api-docs/index.js";
import { registerToolsInvoke } from "./tools-invoke.js";
import { registerReadyz } from "./readyz.js";
import { redisBacklogGuard } from "./redis-backlog.js";
import { wellFormedDeep } from "../text/well-formed.js";

export type ToolEndpoint = (name: string, body: unknown, opts?: ToolCallOptions) => Promise<unknown>;

/** Why a closing gateway answers its waiting requests early (each door words the rest: the run goes on). */
const GATEWAY_SHUTTING_DOWN = "this gateway is shutting down";

export interface GatewayOptions {
  /** Session tools behind POST /v1/tools/<name>. */
  tools?: ToolEndpoint;
  logger?: boolean;
}

export interface Gateway {
  app: FastifyInstance;
  rpc: Record<string, RpcHandler>;
  listen(): Promise<string>;
  close(): Promise<void>;
}

export async function createGateway(svc: GatewayDeps, opts: GatewayOptions = {}): Promise<Gateway> {
  const app = Fastify({
    logger: opts.logger ? { level: process.env.LOG_LEVEL ?? "info" } : false,
    bodyLimit: requestBodyLimit(svc.config),
    // A URL the router cannot take (bad percent-encoding, an over-long parameter) answers in our
    // error shape too, not fastify's.
    frameworkErrors: (err, req, reply) => httpErrorHandler(err, req, reply),
  });
  const rpc = createRpcMethods(svc);
  // Connections that have not sent a request yet: an HTTP client's spare connection (undici opens
  // one after a request is aborted), a load balancer's preconnect. Node counts them as busy, not
  // idle, so closeIdleConnections leaves them and a close would wait until the client drops them
  // (its idle timeout: 70 s for undici after a `Keep-Alive: timeout=72` answer) or Node's headers
  // timeout (60 s) ends them. Nobody is waiting on them: a closing gateway ends them.
  const unused = new Set<Socket>();
  app.server.on("connection", (socket: Socket) => {
    unused.add(socket);
    socket.once("close", () => unused.delete(socket));
  });
  app.server.on("request", (req: { socket: Socket }) => unused.delete(req.socket));

  app.setErrorHandler(httpErrorHandler);
  app.setNotFoundHandler((req, reply) =>
    reply.status(404).send({
      ok: false,
      error: { code: "not_found", message: `no route for ${req.method} ${req.url.split("?")[0]}` },
    }),
  );
  // First, so its latency hook sees every route (and /metrics itself).
  registerMetrics(app, svc);
  app.addHook("onRequest", createAuthHook(svc.config.gateway.auth.token));
  // Redis hung or partitioned: refuse at once, before the body is read, rather than queue without
  // bound (docs/concepts/reliability.md).
  app.addHook("onRequest", redisBacklogGuard(svc));
  // Text at the edge: nothing with a lone surrogate gets past here (docs/concepts/text.md).
  app.addHook("preHandler", async (req) => {
    if (req.body !== undefined) req.body = wellFormedDeep(req.body);
    req.query = wellFormedDeep(req.query);
    req.params = wellFormedDeep(req.params);
  });
  registerMessageLimit(app, svc.config);

  app.get("/healthz", async () => ({ ok: true }));
  registerReadyz(app, svc);

  app.post("/v1/inbound", async (req, reply) => reply.status(202).send(await handleInbound(svc, req.body)));

  app.post<{ Params: { method: string } }>("/v1/rpc/:method", async (req, reply) => {
    const handler = rpc[req.params.method];
    if (!handler)
      return reply
        .status(404)
        .send({ ok: false, error: { code: "not_found", message: `unknown method ${req.params.method}` } });
    try {
      return { ok: true, result: await handler(req.body ?? {}) };
    } catch (err) {
      // RPC answers 200 with ok:false for domain errors, 400 for invalid params, 429 for a full inbox.
      if (err instanceof SwitchboardError && err.code !== "invalid_request" && err.code !== "queue_full") {
        return { ok: false, error: { code: err.code, message: err.message } };
      }
      throw err;
    }
  });

  app.post<{ Params: { name: string } }>("/v1/tools/:name", async (req, reply) => {
    if (!opts.tools)
      return reply
        .status(404)
        .send({ ok: false, error: { code: "not_found", message: "session tools are not enabled" } });
    // A client that goes away ends a wait in the tool (sessions_send's) at once; the call's work goes on.
    const gone = clientGoneSignal(reply.raw);
    return await opts.tools(req.params.name, req.body, { signal: gone.signal }).finally(gone.dispose);
  });

  app.get<{ Params: { id: string } }>("/v1/runs/:id", async (req, reply) => {
    const rec = await svc.runs.get(req.params.id);
    if (!rec)
      return reply
        .status(404)
        .send({ ok: false, error: { code: "run_not_found", message: `No run found: ${req.params.id}` } });
    return rec;
  });

  app.get<{ Querystring: { sessionKey?: string; channel?: string; limit?: string } }>("/v1/deliveries", async (req) => {
    const q = req.query;
    const limit = q.limit ? Number(q.limit) : undefined;
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
      throw new SwitchboardError("invalid_request", "limit must be a positive integer");
    }
    return await rpc["deliveries.list"]!({
      ...(q.sessionKey ? { sessionKey: q.sessionKey } : {}),
      ...(q.channel ? { channel: q.channel } : {}),
      ...(limit ? { limit } : {}),
    });
  });

  registerToolsInvoke(app, svc, opts.tools); // OpenClaw's POST /tools/invoke
  await registerBullBoard(app, svc);
  await registerOpenAiDoor(app, svc);
  await registerApiDocs(app, { rpcMethods: Object.keys(rpc), messageBytes: svc.config.gateway.limits.messageBytes });

  return {
    app,
    rpc,
    async listen() {
      return await app.listen({ host: svc.config.gateway.host, port: svc.config.gateway.port });
    },
    /**
     * Stop accepting (the listener closes; requests still arriving on open connections get
     * 503), answer the in-flight waits of requests as timeouts that say so, so their clients ask
     * another gateway, then resolve once every in-flight request is answered. The waits of turns
     * running in this process (`switchboard start`) are not the gateway's: they go on.
     */
    async close() {
      const closed = app.close();
      await svc.existingWaiter()?.handOver(GATEWAY_SHUTTING_DOWN);
      // Keep-alive connections of answered requests, and connections that never sent a request,
      // stay open otherwise, and the close waits on them. Those with a request in flight stay.
      const reapIdle = () => {
        app.server.closeIdleConnections();
        for (const socket of unused) socket.destroy();
      };
      const reap = setInterval(reapIdle, 50);
      reapIdle();
      try {
        await closed;
      } finally {
        clearInterval(reap);
      }
    },
  };
}
