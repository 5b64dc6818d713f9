/**
 * Redis at its maxmemory (review "load", finding 2), on a private redis-server whose maxmemory
 * is set just above what it uses: a push answers 503 `redis_full` with Retry-After and a message
 * that says what to do (never Redis's reply with its script hash), /readyz says `redis: "full"`,
 * doctor's Redis check fails, the CLI's direct mode says the same; once memory is raised again
 * everything answers as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { newRedis } from "../helpers/context.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptConfig } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";
import { REDIS_FULL_MESSAGE } from "../../src/errors/index.js";
import { checkRedis } from "../../src/doctor/checks.js";
import { directClient } from "../../src/cli/direct-client.js";
import type { Redis } from "ioredis";

let redis: PrivateRedis;
let admin: Redis;
let gw: TestSystem;

beforeAll(async () => {
  redis = await startPrivateRedis();
  admin = newRedis(redis.url);
  // A gateway and no workers: what is pushed stays queued, so memory only grows.
  gw = await startTestSystem(scriptConfig([{ reply: "re: {{text}}" }], { redis: { url: redis.url } }), {
    gateway: true,
    workers: false,
  });
});

afterAll(async () => {
  await admin?.config("SET", "maxmemory", "0").catch(() => {});
  admin?.disconnect();
  await gw?.close();
  await redis?.cleanup();
}, 30_000);

async function usedMemory(): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await admin.info("memory"))![1]);
}

async function push(i: number): Promise<Response> {
  return await fetch(`${gw.url}/v1/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      channel: "telegram",
      chatType: "dm",
      from: "filler",
      text: `${i} ${"x".repeat(20_000)}`,
    }),
  });
}

describe("Redis full", () => {
  it("answers 503 redis_full with Retry-After, never Redis's reply; /readyz and doctor say full", async () => {
    const first = await push(0);
    expect(first.status, await first.text()).toBe(202);
    expect((await gw.get("/readyz")).body).toEqual({ ok: true, redis: "up", storage: "ok" });

    await admin.config("SET", "maxmemory", String((await usedMemory()) + 300_000));
    let refused: Response | undefined;
    for (let i = 1; i <= 200 && !refused; i++) {
      const res = await push(i);
      if (res.status === 202) await res.body?.cancel();
      else refused = res;
    }
    expect(refused, "a push refused once Redis is full").toBeDefined();
    const text = await refused!.text();
    expect(refused!.status, text).toBe(503);
    expect(refused!.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(JSON.parse(text)).toEqual({ ok: false, error: { code: "redis_full", message: REDIS_FULL_MESSAGE } });
    expect(text).not.toMatch(/script|user_script|OOM|[0-9a-f]{40}/);

    // At the edge a small write may still get in (a refused one frees its buffer): from here on
    // Redis is well over its maxmemory, so every write is refused.
    await admin.config("SET", "maxmemory", String(Math.floor((await usedMemory()) / 2)));
    // Another door, another session: the same answer (RPC answers it as a 503 too, like `unavailable`).
    const viaRpc = await gw.post("/v1/rpc/agent", { sessionKey: "agent:main:other", message: "hello" });
    expect(viaRpc.status, JSON.stringify(viaRpc.body)).toBe(503);
    expect(viaRpc.body).toEqual({ ok: false, error: { code: "redis_full", message: REDIS_FULL_MESSAGE } });

    // /readyz reads INFO memory (at most once a second).
    await settle(async () => (await gw.get("/readyz")).status === 503, {
      what: "/readyz answering 503 (Redis full)",
      timeoutMs: 5000,
    });
    const ready = await gw.get("/readyz");
    expect(ready.body).toMatchObject({ ok: false, redis: "full", storage: "ok" });
    expect(ready.body.error).toMatch(/out of memory: used .* of maxmemory/);

    // doctor's Redis check.
    const findings = await checkRedis(admin, redis.url);
    const fail = findings.find((f) => f.level === "fail");
    expect(fail, JSON.stringify(findings)).toMatchObject({ check: "redis" });
    expect(fail!.message).toMatch(/out of memory|refused \d+ writes/);

    // The CLI without a gateway (direct mode) says the same.
    const cli = await directClient(gw.config);
    try {
      await expect(cli.rpc("agent", { sessionKey: "agent:main:cli", message: "hi" })).rejects.toMatchObject({
        code: "redis_full",
        message: REDIS_FULL_MESSAGE,
      });
    } finally {
      await cli.close();
    }

    // Room again: pushes and /readyz answer as before.
    await admin.config("SET", "maxmemory", "0");
    await settle(async () => (await gw.get("/readyz")).status === 200, {
      what: "/readyz answering 200 again",
      timeoutMs: 5000,
    });
    const after = await push(999);
    expect(after.status, await after.text()).toBe(202);
  });

  it("/readyz reads INFO at most about once a second, however often it is probed", async () => {
    const infoCalls = async () => Number(/cmdstat_info:calls=(\d+)/.exec(await admin.info("commandstats"))?.[1] ?? 0);
    const before = await infoCalls();
    const started = Date.now();
    for (let i = 0; i < 20; i++) expect((await gw.get("/readyz")).status).toBe(200);
    const seconds = Math.ceil((Date.now() - started) / 1000);
    // The 20 probes (one read per second they took, and one more at the start) plus this test's
    // own two INFO commandstats reads; on a quiet machine the probes take well under a second.
    expect((await infoCalls()) - before).toBeLessThanOrEqual(3 + seconds);
  });
});
