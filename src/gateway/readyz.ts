/**
 * GET /readyz, for load balancers and orchestrators (open, no token): 200 when this gateway can
 * take requests (Redis answers and has room under its maxmemory); 503 and why otherwise
 * (`redis: "down"`, `redis: "backlogged"` while the gateway refuses requests because Redis does
 * not answer its commands, `redis: "full"`). Transcript storage refusing writes is reported
 * (`storage: "unhealthy"` with its error code only) but keeps 200: it is the whole deployment's
 * state, not this gateway's, turns accepted meanwhile are queued in Redis and run once storage is
 * back, and a 503 on every gateway at once would take the whole API out of the load balancer.
 * Cheap: one PING, one GET and an `INFO memory` read at most once a second, whatever the probe rate.
 */
import type { FastifyInstance } from "fastify";
import type { GatewayDeps } from "./gateway-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import { isFull, redisMemory, type RedisMemory } from "../errors/index.js";
import { StorageFaults } from "../runs/storage-faults.js";
import { redisBacklog } from "./redis-backlog.js";

/** How long one `INFO memory` reading answers /readyz. */
const MEMORY_READ_EVERY_MS = 1000;
/** A probe that waits longer than this for Redis says "down". */
const PROBE_TIMEOUT_MS = 1000;

/** The fullest node: the one server, or every master of a Cluster. */
async function readMemory(redis: RedisClient): Promise<RedisMemory | undefined> {
  const nodes: RedisClient[] = "nodes" in redis ? redis.nodes("master") : [redis];
  const all = (await Promise.all(nodes.map(async (n) => redisMemory(await n.info("memory"))))).filter(
    (m): m is RedisMemory => m !== undefined,
  );
  return all.sort((a, b) => (b.ratio ?? 0) - (a.ratio ?? 0))[0];
}

/** `read()` runs `INFO memory` at most once per `everyMs`; probes in between share its answer. */
export function memoryReader(
  redis: RedisClient,
  everyMs = MEMORY_READ_EVERY_MS,
  now: () => number = Date.now,
): () => Promise<RedisMemory | undefined> {
  let last: { at: number; reading: Promise<RedisMemory | undefined> } | undefined;
  return () => {
    const t = now();
    if (!last || t - last.at >= everyMs) {
      const reading = readMemory(redis);
      last = { at: t, reading };
      // A failed read is not kept: the next probe asks again.
      reading.catch(() => {
        if (last?.reading === reading) last = undefined;
      });
    }
    return last.reading;
  };
}

/** An errno-style code (`ENOSPC`) as it is; anything else a worker reported is not echoed. */
function faultCode(code: unknown): string {
  return typeof code === "string" && /^[A-Z][A-Z0-9_]{0,31}$/.test(code) ? code : "EUNKNOWN";
}

const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

export function registerReadyz(app: FastifyInstance, svc: GatewayDeps): void {
  const memory = memoryReader(svc.redis);
  app.get("/readyz", async (_req, reply) => {
    // Fail fast: a worker-style connection would queue the PING until Redis is back.
    if (svc.redis.status !== "ready")
      return reply.status(503).send({ ok: false, redis: "down", error: `connection ${svc.redis.status}` });
    // Over its limit the gateway refuses what needs Redis; a PING would only join the queue.
    const backlog = redisBacklog(svc);
    if (backlog) return reply.status(503).send({ ok: false, redis: "backlogged", error: backlog.message });
    try {
      const [fault, mem] = await Promise.race([
        svc.redis
          .ping()
          // Memory unread (INFO refused by an ACL, say) does not make Redis "down".
          .then(() => Promise.all([StorageFaults.current(svc.redis, svc.keys), memory().catch(() => undefined)])),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error("ping timed out")), PROBE_TIMEOUT_MS).unref(),
        ),
      ]);
      // At maxmemory Redis refuses every write: no message can be queued (doctor warns before).
      if (mem && isFull(mem))
        return reply.status(503).send({
          ok: false,
          redis: "full",
          storage: fault ? "unhealthy" : "ok",
          error:
            `Redis is out of memory: used ${mib(mem.usedBytes)} of maxmemory ${mib(mem.maxBytes)}; ` +
            "raise maxmemory or free memory",
        });
      // Workers report transcript storage refusing writes; turns are parked meanwhile. The code
      // only: this route needs no token, and the message names paths, agent ids and sessionIds
      // (`switchboard doctor` and `status` show it in full).
      if (fault) {
        const code = faultCode(fault.code);
        return {
          ok: true,
          redis: "up",
          storage: "unhealthy",
          code,
          warning: `transcript storage refuses writes (${code}): turns are queued and wait until it takes writes again`,
          since: new Date(fault.since).toISOString(),
        };
      }
      return { ok: true, redis: "up", storage: "ok" };
    } catch (err) {
      return reply.status(503).send({ ok: false, redis: "down", error: (err as Error).message });
    }
  });
}
