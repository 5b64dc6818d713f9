/**
 * The CLI against Redis directly, with no gateway: the gateway's own RPC code run in this process.
 * Loaded only when a command goes direct (client.ts `directClientFor`).
 *
 * - `readClient`: the read methods only (rpc/read-methods.ts) on the core services
 *   (app/core-services.ts). Nothing it loads loads BullMQ, which is most of a command's start-up
 *   time: `sessions`, `history`, `deadletters list` and `call` of a read method use it.
 * - `directClient`: every method, on the whole services (queues included).
 */
import type { Config } from "../config/schema.js";
import { createCoreServices, type CoreServices } from "../app/core-services.js";
import { createReadRpcMethods, type RpcHandler } from "../rpc/read-methods.js";
import { isRedisDown, redisFailure } from "../errors/index.js";
import { displayRedisUrl } from "../config/redis-url.js";
import { CLI_COMMAND_TIMEOUT_MS, NO_REPLY } from "../queues/redis-connections.js";
import { type Client, RpcCallError, redisUnavailable } from "./client-base.js";

/** ioredis's error for a command not answered within `commandTimeout` (the CLI's connections). */
function isCommandTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === "Command timed out";
}

/**
 * A direct client over `core` whose methods `methods()` makes on first use; `unknown` is the
 * error for a method not among them; `close` closes what the client opened.
 */
function directMode(
  config: Config,
  core: CoreServices,
  methods: () => Record<string, RpcHandler>,
  unknown: (method: string) => Error,
  close: () => Promise<void>,
): Client {
  // The connection's own error (ECONNREFUSED…) says more than "max retries per request".
  let lastConnectionError: string | undefined;
  core.redis.on("error", (err: Error) => (lastConnectionError = err.message));
  const redisDownCause = (err: unknown): string | undefined => {
    if (isCommandTimeout(err)) return lastConnectionError ?? `${NO_REPLY} within ${CLI_COMMAND_TIMEOUT_MS / 1000} s`;
    return isRedisDown(err) ? (lastConnectionError ?? (err as Error).message) : undefined;
  };
  return {
    mode: "direct",
    describe: displayRedisUrl(config.redis.url),
    core,
    redisDownCause,
    async rpc(method, params) {
      const h = methods()[method];
      if (!h) throw unknown(method);
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
      if (m) return await core.runs.get(decodeURIComponent(m[1]!));
      throw new RpcCallError("not_found", `not available without a gateway: ${path}`);
    },
    close,
  };
}

/** Every RPC method, against Redis directly. */
export async function directClient(config: Config): Promise<Client> {
  // Here, not at the top: a read client must not load them (they load BullMQ).
  const [{ createServices }, { createRpcMethods }] = await Promise.all([
    import("../app/services.js"),
    import("../rpc/methods.js"),
  ]);
  const svc = createServices(config, { role: "cli" });
  let rpc: Record<string, RpcHandler> | undefined;
  const client = directMode(
    config,
    svc,
    () => (rpc ??= createRpcMethods(svc)),
    (method) => new RpcCallError("not_found", `unknown method ${method}`),
    async () => {
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
  );
  return { ...client, svc };
}

/**
 * The read methods only, against Redis directly, without BullMQ. Any other method is refused as
 * an internal error: a command that may write asks for `directClient`.
 */
export function readClient(config: Config): Client {
  const core = createCoreServices(config, { role: "cli" });
  let rpc: Record<string, RpcHandler> | undefined;
  return directMode(
    config,
    core,
    () => (rpc ??= createReadRpcMethods(core)),
    (method) => new RpcCallError("internal", `${method} is not a read method: this command's client only reads`),
    core.close,
  );
}
