import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { SessionStore } from "../../src/storage/index.js";
import { LIST_SCAN_LIMIT } from "../../src/storage/session-store.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { LabelConflictError, SessionNotFoundError, SwitchboardError } from "../../src/errors/index.js";
import { newRedis, testRedisUrl, uniquePrefix } from "../helpers/context.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
let redis: Redis;
let store: SessionStore;
let prefix: string;
const MAIN = { agentId: "main", kind: "main" as const };
const OTHER = { agentId: "main", kind: "other" as const };

beforeAll(() => {
  redis = newRedis();
  prefix = uniquePrefix("store");
  store = new SessionStore(redis, prefix);
});
afterAll(async () => {
  const keys = await redis.keys(`{${prefix}}:*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

describe("SessionStore entries", () => {
  it("creates, merges and deletes fields; nested objects merge one level", async () => {
    const k = "agent:main:merge";
    await store.upsert(
      k,
      OTHER,
      { sessionId: "sid-merge", displayName: "A", deliveryContext: { channel: "telegram", to: "1" } },
      { now: 1000 },
    );
    const e = await store.upsert(
      k,
      OTHER,
      { displayName: null, deliveryContext: { to: "2", threadId: "9" } },
      { now: 2000 },
    );
    expect(e.displayName).toBeUndefined();
    expect(e.deliveryContext).toEqual({ channel: "telegram", to: "2", threadId: "9" });
    expect(e.rev).toBe(2);
    expect(e.createdAt).toBe(1000);
    expect(e.key).toBe(k);
    expect(await store.keyForSessionId("sid-merge")).toBe(k);
  });

  it("updatedAt never moves backwards; metadata-only writes keep it", async () => {
    const k = "agent:main:clock";
    await store.upsert(k, OTHER, { sessionId: "sid-clock", updatedAt: 5000 }, { now: 5000 });
    expect((await store.upsert(k, OTHER, { updatedAt: 3000 }, { now: 3000 })).updatedAt).toBe(5000);
    expect((await store.upsert(k, OTHER, { displayName: "x" }, { now: 9000, activity: "preserve" })).updatedAt).toBe(
      5000,
    );
    expect((await store.upsert(k, OTHER, {}, { now: 7000 })).updatedAt).toBe(7000);
  });

  it("create / update modes and a missing sessionId are typed errors", async () => {
    await expect(store.upsert("agent:main:nosid", OTHER, {})).rejects.toThrow(/needs a sessionId/);
    await expect(
      store.upsert("agent:main:absent", OTHER, { displayName: "x" }, { mode: "update" }),
    ).rejects.toBeInstanceOf(SessionNotFoundError);
    await store.upsert("agent:main:once", OTHER, { sessionId: "sid-once" }, { mode: "create" });
    await expect(
      store.upsert("agent:main:once", OTHER, { sessionId: "sid-once" }, { mode: "create" }),
    ).rejects.toMatchObject({ code: "session_exists" });
  });

  it("labels are unique per agent and follow renames", async () => {
    await store.upsert("agent:main:l1", OTHER, { sessionId: "sid-l1", label: "alpha" });
    await expect(store.upsert("agent:main:l2", OTHER, { sessionId: "sid-l2", label: "alpha" })).rejects.toBeInstanceOf(
      LabelConflictError,
    );
    // The failed write changed nothing.
    expect(await store.get("agent:main:l2")).toBeNull();
    await store.upsert("agent:main:l1", OTHER, { label: "beta" });
    expect(await store.keyForLabel("main", "alpha")).toBeNull();
    expect(await store.keyForLabel("main", "beta")).toBe("agent:main:l1");
    await store.upsert("agent:main:l2", OTHER, { sessionId: "sid-l2", label: "alpha" });
    expect(await store.keyForLabel("main", "alpha")).toBe("agent:main:l2");
  });

  it("lineage is immutable once set, and children are indexed", async () => {
    const parent = "agent:main:main";
    await store.upsert(parent, MAIN, { sessionId: "sid-parent" });
    await store.upsert("agent:main:subagent:c1", OTHER, { sessionId: "sid-c1", spawnedBy: parent, spawnDepth: 1 });
    await store.upsert("agent:main:subagent:c2", OTHER, { sessionId: "sid-c2", spawnedBy: parent, spawnDepth: 1 });
    await expect(
      store.upsert("agent:main:subagent:c1", OTHER, { spawnedBy: "agent:main:other" }),
    ).rejects.toMatchObject({
      code: "lineage_immutable",
    });
    expect((await store.childKeys(parent)).sort()).toEqual(["agent:main:subagent:c1", "agent:main:subagent:c2"]);
    expect(await store.isChildOf(parent, "agent:main:subagent:c1")).toBe(true);
    expect(await store.isChildOf(parent, "agent:main:merge")).toBe(false);
    const kids = await store.list({ spawnedBy: parent });
    expect(kids.map((k) => k.key).sort()).toEqual(["agent:main:subagent:c1", "agent:main:subagent:c2"]);
  });

  it("a reset swaps the sessionId index atomically", async () => {
    const k = "agent:main:rot";
    await store.upsert(k, OTHER, { sessionId: "sid-old" });
    await store.upsert(k, OTHER, { sessionId: "sid-new", previousSessionId: "sid-old" });
    expect(await store.keyForSessionId("sid-old")).toBeNull();
    expect(await store.keyForSessionId("sid-new")).toBe(k);
  });

  it("delete removes the entry from every index", async () => {
    const k = "agent:main:subagent:gone";
    await store.upsert(
      k,
      OTHER,
      { sessionId: "sid-gone", label: "gone", spawnedBy: "agent:main:main" },
      { staleAt: 10 },
    );
    const old = await store.delete(k, "main", "other");
    expect(old?.sessionId).toBe("sid-gone");
    expect(await store.get(k)).toBeNull();
    expect(await store.keyForSessionId("sid-gone")).toBeNull();
    expect(await store.keyForLabel("main", "gone")).toBeNull();
    expect(await store.isChildOf("agent:main:main", k)).toBe(false);
    expect(await store.dueStale(Number.MAX_SAFE_INTEGER, 1000)).not.toContain(k);
    expect(await store.delete(k, "main", "other")).toBeNull();
  });
});

describe("SessionStore listing from indexes", () => {
  const p2 = uniquePrefix("list");
  let s2: SessionStore;
  beforeAll(async () => {
    s2 = new SessionStore(redis, p2);
    const now = 1_000_000_000;
    for (let i = 0; i < 30; i++) {
      const agent = i % 3 === 0 ? "ops" : "main";
      const kind = i % 5 === 0 ? "group" : "other";
      await s2.upsert(
        `agent:${agent}:k${i}`,
        { agentId: agent, kind },
        { sessionId: `sid-${i}`, updatedAt: now + i * 60_000, displayName: `Session ${i}` },
        { now: 0 },
      );
    }
    await s2.upsert(
      "global",
      { agentId: "main", kind: "main" },
      { sessionId: "sid-global", updatedAt: now + 99 * 60_000 },
      { now: 0 },
    );
  });
  afterAll(async () => {
    const keys = await redis.keys(`{${p2}}:*`);
    if (keys.length) await redis.del(...keys);
  });

  it("newest first, limited, reserved keys hidden", async () => {
    const rows = await s2.list({ limit: 5, now: 1_000_000_000 + 30 * 60_000 });
    expect(rows.map((r) => r.key)).toEqual([
      "agent:main:k29",
      "agent:main:k28",
      "agent:ops:k27",
      "agent:main:k26",
      "agent:main:k25",
    ]);
    expect((await s2.list({ limit: 100, includeReserved: true }))[0]?.key).toBe("global");
  });

  it("filters by agent, kind, activeMinutes, search and label", async () => {
    const now = 1_000_000_000 + 29 * 60_000;
    expect((await s2.list({ agentId: "ops", limit: 100 })).every((r) => r.agentId === "ops")).toBe(true);
    expect((await s2.list({ agentId: "ops", limit: 100 })).length).toBe(10);
    const groups = await s2.list({ kinds: ["group"], limit: 100 });
    expect(groups.map((g) => g.key)).toEqual([
      "agent:main:k25",
      "agent:main:k20",
      "agent:ops:k15",
      "agent:main:k10",
      "agent:main:k5",
      "agent:ops:k0",
    ]);
    expect((await s2.list({ kinds: ["group"], agentId: "ops", limit: 100 })).map((g) => g.key)).toEqual([
      "agent:ops:k15",
      "agent:ops:k0",
    ]);
    expect((await s2.list({ activeMinutes: 3, now, limit: 100 })).map((r) => r.key)).toEqual([
      "agent:main:k29",
      "agent:main:k28",
      "agent:ops:k27",
      "agent:main:k26",
    ]);
    expect((await s2.list({ search: "SESSION 1", limit: 100 })).length).toBe(11); // 1, 10-19
  });

  it("the stale index answers what is due", async () => {
    await s2.upsert("agent:main:k1", { agentId: "main", kind: "other" }, {}, { staleAt: 500, activity: "preserve" });
    await s2.upsert("agent:main:k2", { agentId: "main", kind: "other" }, {}, { staleAt: 1500, activity: "preserve" });
    expect(await s2.dueStale(1000, 10)).toEqual(["agent:main:k1"]);
    await s2.upsert("agent:main:k1", { agentId: "main", kind: "other" }, {}, { staleAt: null, activity: "preserve" });
    expect(await s2.dueStale(2000, 10)).toEqual(["agent:main:k2"]);
  });
});

describe("SessionStore under real concurrency", () => {
  it("many clients in one process: no lost increments or fields", async () => {
    const k = "agent:main:hot";
    const clients = Array.from({ length: 8 }, () => newRedis());
    const stores = clients.map((c) => new SessionStore(c, prefix));
    await Promise.all(
      stores.flatMap((s, w) =>
        Array.from({ length: 50 }, (_, i) =>
          s.upsert(k, OTHER, { sessionId: "sid-hot", [`w${w}`]: i } as never, { increment: { inputTokens: 2 } }),
        ),
      ),
    );
    const e = (await store.get(k)) as unknown as Record<string, number>;
    expect(e.inputTokens).toBe(8 * 50 * 2);
    expect(e.rev).toBe(400);
    for (let w = 0; w < 8; w++) expect(typeof e[`w${w}`]).toBe("number");
    await Promise.all(clients.map((c) => c.quit()));
  });

  it("several OS processes updating one entry: nothing lost, updatedAt is the max", async () => {
    const key = "agent:main:multi";
    const procs = 4;
    const iterations = 150;
    await Promise.all(
      Array.from(
        { length: procs },
        (_, idx) =>
          new Promise<void>((resolve, reject) => {
            const child = spawn(
              process.execPath,
              ["test/fixtures/store-writer.mjs", testRedisUrl(), prefix, key, String(idx), String(iterations)],
              {
                cwd: root,
                stdio: ["ignore", "ignore", "pipe"],
              },
            );
            let err = "";
            child.stderr.on("data", (d) => (err += d));
            child.on("exit", (code) =>
              code === 0 ? resolve() : reject(new Error(`writer ${idx} exited ${code}: ${err}`)),
            );
          }),
      ),
    );
    const e = (await store.get(key)) as unknown as Record<string, number>;
    expect(e.totalTokens).toBe(procs * iterations);
    expect(e.rev).toBe(procs * iterations);
    for (let w = 0; w < procs; w++) expect(e[`field_w${w}`]).toBe(iterations - 1);
    // Every writer's updatedAt was in [1_000_000, 1_100_000); the stored one is their maximum.
    let max = 0;
    for (let w = 0; w < procs; w++)
      for (let i = 0; i < iterations; i++) max = Math.max(max, 1_000_000 + ((i * 7919 + w * 104729) % 100_000));
    expect(e.updatedAt).toBe(max);
    expect(await redis.zscore(store.keys.updatedIndex(), key)).toBe(String(max));
  });

  it("concurrent label claims: exactly one wins", async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        store.upsert(`agent:main:claim${i}`, OTHER, { sessionId: `sid-claim${i}`, label: "the-one" }),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const losers = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(losers.every((l) => l.reason instanceof LabelConflictError && l.reason instanceof SwitchboardError)).toBe(
      true,
    );
  });
});

describe("listing every session", () => {
  it("pages past LIST_SCAN_LIMIT when nothing but the reserved keys is left out (it stopped at 10,000)", async () => {
    const ownPrefix = uniquePrefix("many");
    const own = new SessionStore(redis, ownPrefix);
    const keys = new RedisKeys(ownPrefix);
    const n = LIST_SCAN_LIMIT + 150;
    const t0 = Date.now() - n;
    const pipe = redis.pipeline();
    for (let i = 0; i < n; i++) {
      const key = `agent:main:s${i}`;
      const entry = { key, sessionId: `id-${i}`, agentId: "main", kind: "other", createdAt: t0 + i, updatedAt: t0 + i };
      pipe.set(keys.session(key), JSON.stringify(entry)).zadd(keys.updatedIndex(), t0 + i, key);
    }
    // A reserved key among them, newest of all: left out, and it does not shorten a page.
    const g = { key: "global", sessionId: "id-g", agentId: "main", kind: "main", createdAt: t0 + n, updatedAt: t0 + n };
    pipe.set(keys.session("global"), JSON.stringify(g)).zadd(keys.updatedIndex(), t0 + n, "global");
    await pipe.exec();
    try {
      const last = await own.list({ offset: LIST_SCAN_LIMIT, limit: 200 });
      expect(last).toHaveLength(150);
      expect(last.at(-1)!.key).toBe("agent:main:s0");
      const first = await own.list({ limit: 1 });
      expect(first.map((e) => e.key)).toEqual([`agent:main:s${n - 1}`]);
      expect((await own.list({ limit: 1, includeReserved: true })).map((e) => e.key)).toEqual(["global"]);
    } finally {
      const all = await redis.keys(`${keys.base}:*`);
      for (let i = 0; i < all.length; i += 1000) await redis.del(...all.slice(i, i + 1000));
    }
  }, 60_000);
});
