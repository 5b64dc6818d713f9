/**
 * GET /readyz, for load balancers and orchestrators (open, no token): 200 when Redis answers,
 * has room (under its maxmemory) and transcript storage takes writes; 503 and why otherwise
 * (`redis: "down"`, `redis: "full"`, `storage: "unhealthy"`). Cheap: one PING, one GET and an
 * `INFO memory` read at most once a second, whatever the probe rate.
 */
import type { FastifyInstance } from "fastify";
import type { GatewayDeps } from "./gateway-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import { isFull, redisMemory, type RedisMemory } from "../errors/index.js";
import { StorageFaults } from "../runs/storage-faults.js";

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

const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

export function registerReadyz(app: FastifyInstance, svc: GatewayDeps): void {
  const memory = memoryReader(svc.redis);
  app.get("/readyz", async (_req, reply) => {
    // Fail fast: a worker-style connection would queue the PING until Redis is back.
    if (svc.redis.status !== "ready")
      return reply.status(503).send({ ok: false, redis: "down", error: `connection ${svc.redis.status}` });
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
      // Workers report transcript storage refusing writes; turns are parked meanwhile.
      if (fault)
        return reply.status(503).send({
          ok: false,
          redis: "up",
          storage: "unhealthy",
          error: `${fault.code}: ${fault.message}`,
          since: new Date(fault.since).toISOString(),
        });
      return { ok: true, redis: "up", storage: "ok" };
    } catch (err) {
      return reply.status(503).send({ ok: false, redis: "down", error: (err as Error).message });
    }
  });
}
