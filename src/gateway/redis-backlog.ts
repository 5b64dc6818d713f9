/**
 * A bound on the work a gateway has waiting on Redis (docs/concepts/reliability.md, "Redis hung
 * or unreachable"). A hung or partitioned Redis keeps its connections open and answers nothing,
 * so every request that sends it a command adds to the connection's queue (the command, its
 * message, the request waiting on it), whether or not its client is still there: a gateway grew
 * by about 10 KB per abandoned request, without bound, and ran every queued turn when Redis came
 * back. Past `gateway.limits.maxPendingRedisCommands` commands (or
 * `maxPendingRedisBytes` bytes its socket has not taken) a request that needs Redis is refused at
 * once with 503 `unavailable` and `Retry-After`, before anything is read or queued, and /readyz
 * says `redis: "backlogged"`, so a load balancer sends the gateway nothing more.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors/index.js";
import { REDIS_UNAVAILABLE_RETRY_AFTER_S } from "../errors/redis-failure.js";
import { pendingWork } from "../queues/redis-connections.js";
import type { Queues } from "../queues/queues.js";
import type { RedisClient } from "../storage/redis-client.js";
import { DOCS_PATH, OPENAPI_PATH } from "./api-docs/index.js";
import { BOARD_PATH } from "./bull-board.js";
import { httpErrorHandler } from "./http-errors.js";

export interface RedisBacklogDeps {
  config: Config;
  log: Logger;
  redis: RedisClient;
  queues: Queues;
}

export interface RedisBacklog {
  limitName: "maxPendingRedisCommands" | "maxPendingRedisBytes";
  limit: number;
  commands: number;
  unsentBytes: number;
  message: string;
}

/** Routes that never touch Redis: answered whatever its state (route patterns, as fastify has them). */
function needsNoRedis(route: string | undefined): boolean {
  if (route === undefined) return true; // no route: the 404 handler
  return (
    route === "/healthz" ||
    route === "/readyz" || // answers "backlogged" itself
    route === OPENAPI_PATH ||
    route === DOCS_PATH ||
    route.startsWith(`${DOCS_PATH}/`) ||
    route.startsWith("/v1/models") || // the agents, from the config
    route.startsWith(`${BOARD_PATH}/static/`)
  );
}

const isClient = (c: unknown): c is RedisClient =>
  typeof c === "object" && c !== null && "isCluster" in c && "sendCommand" in c;

const connectionsOf = new WeakMap<RedisBacklogDeps, RedisClient[]>();

/**
 * The gateway's command connections: its own and its BullMQ queues' (one shared connection).
 * Fixed for a gateway's life, so found once: this runs on every request.
 */
function connections(svc: RedisBacklogDeps): RedisClient[] {
  let found = connectionsOf.get(svc);
  if (!found) {
    const all = new Set<RedisClient>([svc.redis]);
    for (const q of Object.values(svc.queues)) if (isClient(q.opts.connection)) all.add(q.opts.connection);
    found = [...all];
    connectionsOf.set(svc, found);
  }
  return found;
}

/** Over a limit: by how much and the message a refused client gets; undefined when within both. */
export function redisBacklog(svc: RedisBacklogDeps): RedisBacklog | undefined {
  const { maxPendingRedisCommands: maxCommands, maxPendingRedisBytes: maxBytes } = svc.config.gateway.limits;
  if (maxCommands === 0 && maxBytes === 0) return undefined;
  let commands = 0;
  let unsentBytes = 0;
  for (const c of connections(svc)) {
    const p = pendingWork(c);
    commands += p.commands;
    unsentBytes += p.unsentBytes;
  }
  let over: Pick<RedisBacklog, "limitName" | "limit"> & { what: string };
  if (maxCommands > 0 && commands >= maxCommands)
    over = { limitName: "maxPendingRedisCommands", limit: maxCommands, what: `${commands} commands` };
  else if (maxBytes > 0 && unsentBytes >= maxBytes)
    over = { limitName: "maxPendingRedisBytes", limit: maxBytes, what: `${unsentBytes} bytes of commands` };
  else return undefined;
  return {
    limitName: over.limitName,
    limit: over.limit,
    commands,
    unsentBytes,
    message:
      `Redis is not answering: ${over.what} of this gateway wait for it ` +
      `(gateway.limits.${over.limitName} is ${over.limit}); nothing was queued; try again`,
  };
}

/**
 * onRequest hook: refuses a request that needs Redis while the backlog is over its limit. Before
 * the body is read, so a refused request costs neither memory nor a command. One warning at most
 * every 10 s while refusing, with how many were refused since the last.
 */
export function redisBacklogGuard(svc: RedisBacklogDeps) {
  let refused = 0;
  let lastLog = 0;
  return async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    if (needsNoRedis(req.routeOptions.url)) return undefined;
    const backlog = redisBacklog(svc);
    if (!backlog) return undefined;
    refused++;
    if (Date.now() - lastLog >= 10_000) {
      lastLog = Date.now();
      const { commands, unsentBytes, limitName, limit } = backlog;
      svc.log.warn({ commands, unsentBytes, limitName, limit, refused }, "refusing requests: Redis is not answering");
      refused = 0;
    }
    // Answered here, not thrown: a plugin's own error handler (Bull Board's) would make it a 500.
    // The OpenAI door's onSend hook still puts it in OpenAI's shape.
    const err = new SwitchboardError("unavailable", backlog.message, {
      retryAfterSeconds: REDIS_UNAVAILABLE_RETRY_AFTER_S,
    });
    httpErrorHandler(err, req, reply);
    return reply;
  };
}
