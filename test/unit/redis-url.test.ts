/**
 * `redis.url`: one Redis (redis://, rediss://) or a Redis Cluster by its seed nodes
 * (redis+cluster://, rediss+cluster://), validated by the config schema.
 */
import { describe, expect, it } from "vitest";
import { Cluster, Redis } from "ioredis";
import { parseConfig, parseRedisUrl } from "../../src/config/index.js";
import { displayRedisUrl } from "../../src/config/redis-url.js";
import { ConfigError } from "../../src/errors/index.js";
import { openRedis } from "../../src/queues/redis-connections.js";

describe("redis.url forms", () => {
  it("redis:// and rediss:// name one server and are passed to ioredis as they are", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6390/2")).toEqual({ kind: "single", url: "redis://127.0.0.1:6390/2" });
    expect(parseRedisUrl("rediss://u:p@example.com:6380")).toEqual({
      kind: "single",
      url: "rediss://u:p@example.com:6380",
    });
  });

  it("redis+cluster:// lists seed nodes; credentials are URL-decoded; the port defaults to 6379", () => {
    expect(parseRedisUrl("redis+cluster://10.0.0.1:7001,10.0.0.2:7002, node-3")).toEqual({
      kind: "cluster",
      nodes: [
        { host: "10.0.0.1", port: 7001 },
        { host: "10.0.0.2", port: 7002 },
        { host: "node-3", port: 6379 },
      ],
      tls: false,
    });
    expect(parseRedisUrl("rediss+cluster://app:p%40ss%3Aw@[::1]:7001,h2:7002/")).toEqual({
      kind: "cluster",
      nodes: [
        { host: "::1", port: 7001 },
        { host: "h2", port: 7002 },
      ],
      username: "app",
      password: "p@ss:w",
      tls: true,
    });
    // Password only, in both spellings used for redis:// URLs.
    expect(parseRedisUrl("redis+cluster://:secret@h:1")).toMatchObject({ password: "secret" });
    expect(parseRedisUrl("redis+cluster://:secret@h:1")).not.toHaveProperty("username");
    expect(parseRedisUrl("redis+cluster://secret@h:1")).toMatchObject({ password: "secret" });
  });

  it("refuses what a cluster cannot be, with the reason", () => {
    expect(() => parseRedisUrl("redis+cluster://h:1/3")).toThrow(/only database 0/);
    expect(() => parseRedisUrl("redis+cluster://h:99999")).toThrow(/no valid port/);
    expect(() => parseRedisUrl("redis+cluster://h:1,,h:2")).toThrow(/not host:port/);
    expect(() => parseRedisUrl("http://h:1")).toThrow(/redis\+cluster:\/\//);
  });

  it("the config schema accepts cluster URLs and reports bad ones at redis.url", () => {
    expect(parseConfig({ redis: { url: "redis+cluster://a:7001,b:7002" } }).redis.url).toBe(
      "redis+cluster://a:7001,b:7002",
    );
    try {
      parseConfig({ redis: { url: "redis+cluster://a:7001/1" } });
      expect.unreachable("a cluster URL with a database must be refused");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
        "redis.url: a Redis Cluster has only database 0 (got /1)",
      ]);
    }
  });

  it("builds a Cluster for cluster URLs (options on every node) and a Redis otherwise", () => {
    const c = openRedis(
      "rediss+cluster://u:pw@127.0.0.1:1,127.0.0.1:2",
      { lazyConnect: true, maxRetriesPerRequest: null },
      () => null,
      { lazyConnect: true },
    );
    const r = openRedis("redis://127.0.0.1:1", { lazyConnect: true, maxRetriesPerRequest: 1 }, () => null);
    try {
      expect(c).toBeInstanceOf(Cluster);
      const opts = (c as Cluster).options.redisOptions!;
      // BullMQ requires maxRetriesPerRequest null on a blocking Cluster connection's node options.
      expect(opts).toMatchObject({ maxRetriesPerRequest: null, username: "u", password: "pw", tls: {} });
      expect(r).toBeInstanceOf(Redis);
      expect((r as Redis).options).toMatchObject({ maxRetriesPerRequest: 1, port: 1 });
    } finally {
      c.disconnect();
      r.disconnect();
    }
  });
});

describe("displayRedisUrl", () => {
  it("masks the password (and a lone user part, which Redis takes as one), keeps the rest", () => {
    expect(displayRedisUrl("redis://default:p%40ss@10.0.0.1:6380/2")).toBe("redis://default:***@10.0.0.1:6380/2");
    expect(displayRedisUrl("rediss://secret@host")).toBe("rediss://***@host");
    expect(displayRedisUrl("redis+cluster://app:pw@a:1,b:2")).toBe("redis+cluster://app:***@a:1,b:2");
    expect(displayRedisUrl("redis://:pw@host:1")).toBe("redis://:***@host:1");
    expect(displayRedisUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });
});
