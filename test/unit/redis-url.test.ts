/**
 * `redis.url`: one Redis (redis://, rediss://) or a Redis Cluster by its seed nodes
 * (redis+cluster://, rediss+cluster://), validated by the config schema.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Cluster, Redis } from "ioredis";
import { parseConfig, parseRedisUrl } from "../../src/config/index.js";
import { loadConfig } from "../../src/config/load.js";
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

  it("refuses a single-server URL that would connect somewhere else or SELECT a bad database", () => {
    // No host: ioredis would silently use 127.0.0.1:6379, the machine's own Redis.
    expect(() => parseRedisUrl("redis://")).toThrow(/^no host in "redis:\/\/"/);
    expect(() => parseRedisUrl("redis://:6390")).toThrow(/no host/);
    expect(() => parseRedisUrl("redis://u:secret@:6390/1")).toThrow('no host in "redis://u:***@:6390/1"');
    expect(() => parseRedisUrl("redis:///3")).toThrow(/no host/);
    // A bad port: ioredis would take ":notaport" for the database and send SELECT NaN.
    expect(() => parseRedisUrl("redis://127.0.0.1:notaport")).toThrow(/port must be a number 1-65535 \(got "notaport"/);
    expect(() => parseRedisUrl("redis://h:99999")).toThrow(/port must be a number 1-65535 \(got "99999"/);
    expect(() => parseRedisUrl("redis://h:0")).toThrow(/port must be/);
    // A bad database: SELECT NaN, or an out-of-range SELECT retried for ever.
    expect(() => parseRedisUrl("redis://h:6390/abc")).toThrow(/database must be a number 0-15 \(got "\/abc"/);
    expect(() => parseRedisUrl("redis://h:6390/99")).toThrow(/database must be a number 0-15 \(got "\/99"/);
    expect(() => parseRedisUrl("redis://h:6390/-1")).toThrow(/database must be/);
    expect(() => parseRedisUrl("redis://h:6390?db=x")).toThrow(/got "\?db=x"/);
    expect(() => parseRedisUrl("redis://h:6390/1/2")).toThrow(/database must be/);
    expect(() => parseRedisUrl("rediss://a b:1")).toThrow(/not a valid URL/);
  });

  it("accepts every ordinary single-server form", () => {
    for (const url of [
      "redis://h",
      "redis://h/",
      "redis://h:6390/0",
      "redis://h:6390/15",
      "redis://[::1]:6390/3",
      "redis://:pw@h:1",
      "rediss://user:p%40ss@redis.example.com:6380?db=2",
      "redis://h:/2",
    ])
      expect(parseRedisUrl(url)).toEqual({ kind: "single", url });
  });

  it("config validation reports a bad single-server URL at redis.url, and at REDIS_URL when it came from there", () => {
    try {
      parseConfig({ redis: { url: "redis://" } });
      expect.unreachable("a URL without a host must be refused");
    } catch (err) {
      expect((err as ConfigError).issues).toEqual([
        { path: "redis.url", message: 'no host in "redis://" (e.g. redis://127.0.0.1:6379)' },
      ]);
    }
    const dir = mkdtempSync(join(tmpdir(), "sb-redis-url-"));
    writeFileSync(join(dir, "c.json5"), "{}");
    try {
      loadConfig({ file: join(dir, "c.json5"), env: { REDIS_URL: "redis://127.0.0.1:6390/abc" } });
      expect.unreachable("REDIS_URL with a bad database must be refused");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toEqual(["REDIS_URL"]);
      expect((err as ConfigError).issues[0]!.message).toMatch(/database must be a number 0-15/);
    }
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

  it("masks a password holding a raw @ up to the authority's last @ (ioredis reads it so), cluster forms too", () => {
    // Accepted as they are, and they work: the password is everything up to the last @.
    expect(parseRedisUrl("redis://:p@ss@127.0.0.1:1")).toEqual({ kind: "single", url: "redis://:p@ss@127.0.0.1:1" });
    expect(parseRedisUrl("redis+cluster://u:x@y@h:1,h:2")).toMatchObject({
      kind: "cluster",
      username: "u",
      password: "x@y",
    });
    expect(displayRedisUrl("redis://:p@ss@127.0.0.1:1")).toBe("redis://:***@127.0.0.1:1");
    expect(displayRedisUrl("redis://user:a@b@c@host:1/0")).toBe("redis://user:***@host:1/0");
    expect(displayRedisUrl("rediss://s@cr@t@host")).toBe("rediss://***@host");
    expect(displayRedisUrl("redis+cluster://u:x@y@h:1,h:2")).toBe("redis+cluster://u:***@h:1,h:2");
    expect(displayRedisUrl("rediss+cluster://admin:p@w@a:1,b:2/0")).toBe("rediss+cluster://admin:***@a:1,b:2/0");
    // A @ after the authority's end, when the authority has user info, is not part of it.
    expect(displayRedisUrl("redis://user:pw@host:1/0?name=a@b")).toBe("redis://user:***@host:1/0?name=a@b");
  });

  it("never shows a password that broke the URL, nor one passed as a query parameter", () => {
    // A raw / ? or # in the password ends the authority early: the URL is refused, and shown in the error.
    for (const secret of ["pa/ss", "pa?ss", "pa#ss"]) {
      const url = `redis://:${secret}@host:1`;
      expect(displayRedisUrl(url)).toBe("redis://:***@host:1");
      let message = "";
      try {
        parseRedisUrl(url);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).not.toContain(secret);
    }
    expect(displayRedisUrl("redis://host:1?password=hunter22&db=1")).toBe("redis://host:1?password=***&db=1");
    expect(displayRedisUrl("user:hunter22@host:1")).toBe("user:***@host:1");
  });

  it("keeps the host of a URL whose only @ is in a query value; masks only password-style parameters", () => {
    expect(displayRedisUrl("redis://host:6379/0?user=a@b")).toBe("redis://host:6379/0?user=a@b");
    expect(displayRedisUrl("redis://[::1]:6379/0?name=a@b&password=x@y")).toBe(
      "redis://[::1]:6379/0?name=a@b&password=***",
    );
    expect(displayRedisUrl("redis://h:1/0?password=abc#x")).toBe("redis://h:1/0?password=***#x");
    expect(displayRedisUrl("redis://:pw@h?Password=a&redisOptions.password=b")).toBe(
      "redis://:***@h?Password=***&redisOptions.password=***",
    );
    expect(displayRedisUrl("redis+cluster://h1:7000,h2:7001?user=a@b")).toBe(
      "redis+cluster://h1:7000,h2:7001?user=a@b",
    );
  });

  it("a URL that parses but has a @ outside a query value: the password's rest, masked up to the last @", () => {
    // `redis://secret/x@host` parses (host "secret", path "/x@host"); a Redis path is only a database number.
    expect(displayRedisUrl("redis://secret/x@host:1")).toBe("redis://***@host:1");
    expect(displayRedisUrl("redis://user:12?34@host")).toBe("redis://user:***@host");
    expect(displayRedisUrl("redis://user:12#34@host")).toBe("redis://user:***@host");
    expect(displayRedisUrl("redis://user:12?a=1&b@host")).toBe("redis://user:***@host");
    // Does not parse (`:pa` is no port): masked up to the last @ even though it follows a `=`.
    expect(displayRedisUrl("redis://:pa?x=ss@host")).toBe("redis://:***@host");
  });
});

describe("cluster nodes and several URLs: credentials read and masked node by node", () => {
  const messageOf = (url: string): string => {
    try {
      parseRedisUrl(url);
    } catch (err) {
      return (err as Error).message;
    }
    return expect.unreachable(`${url} must be refused`);
  };

  it("masks each node's user info on its own: no host eaten, no password shown", () => {
    // Masked to the list's last @, the first node's host was eaten (`:***@h2:7001`).
    expect(displayRedisUrl("redis+cluster://:p1secret@h1:7000,:p2secret@h2:7001/0")).toBe(
      "redis+cluster://:***@h1:7000,:***@h2:7001/0",
    );
    expect(displayRedisUrl("rediss+cluster://u:a@b@h1:1,u:c@d@h2:2")).toBe("rediss+cluster://u:***@h1:1,u:***@h2:2");
    // A raw `,` in a later node's password: its first piece is masked with it.
    expect(displayRedisUrl("redis+cluster://:pw1@h1:1,:p2a,p2b@h2:2")).toBe("redis+cluster://:***@h1:1,:***@h2:2");
    // Several URLs: the second's password was shown (the first's user info ended at its `@`).
    expect(displayRedisUrl("redis://:p1secret@h1:7000,redis://:p2secret@h2:7001")).toBe(
      "redis://:***@h1:7000,redis://:***@h2:7001",
    );
    expect(displayRedisUrl("redis+cluster://:p1secret@h1:7000, rediss+cluster://p2secret@h2:7001")).toBe(
      "redis+cluster://:***@h1:7000, rediss+cluster://***@h2:7001",
    );
  });

  it("reads the same credentials repeated on every node; nodes are not swallowed into a password", () => {
    // Read to the list's last @, this was one node (h2) with the password "pw@h1:7000,:pw".
    expect(parseRedisUrl("redis+cluster://:pw@h1:7000,:pw@h2:7001")).toEqual({
      kind: "cluster",
      nodes: [
        { host: "h1", port: 7000 },
        { host: "h2", port: 7001 },
      ],
      password: "pw",
      tls: false,
    });
    // Given once, before the first node, with a raw `,` and `@` in the password: as before.
    expect(parseRedisUrl("redis+cluster://u:p,w@x@h1:1,h2:2")).toMatchObject({
      username: "u",
      password: "p,w@x",
      nodes: [
        { host: "h1", port: 1 },
        { host: "h2", port: 2 },
      ],
    });
  });

  it("refuses nodes with other credentials, and several URLs, without showing a password", () => {
    const perNode = messageOf("redis+cluster://:p1secret@h1:7000,:p2secret@h2:7001");
    expect(perNode).toMatch(/cluster node "h2:7001" has other credentials than the first/);
    const severalUrls = messageOf("redis://:p1secret@h1:7000,redis://:p2secret@h2:7001");
    expect(severalUrls).toMatch(/^one URL only \(got "redis:\/\/:\*\*\*@h1:7000,redis:\/\/:\*\*\*@h2:7001"\)/);
    const clusterUrls = messageOf("redis+cluster://:p1secret@h1:7000,redis+cluster://:p2secret@h2:7001");
    expect(clusterUrls).toMatch(/^one URL only/);
    // A raw `,` in a later node's password: refused for its credentials, its pieces not shown.
    const rawComma = messageOf("redis+cluster://:pw1@h1:1,:p2a,p2b@h2:2");
    expect(rawComma).toMatch(/cluster node "h2:2" has other credentials/);
    // What is no node before a node with credentials may be a password's piece: named by its place only.
    expect(messageOf("redis+cluster://:pw@h1:1,p2a:p2b,:pw@h2:2")).toBe("cluster node 2 is not host:port");
    // A raw `/` in a password: what follows it is no database, and is not shown as one.
    const rawSlash = messageOf("redis+cluster://:pw1@h1:1,:p2a/p2b@h2:2");
    expect(rawSlash).toMatch(/^a Redis Cluster has only database 0/);
    for (const message of [perNode, severalUrls, clusterUrls, rawComma, rawSlash])
      for (const secret of ["p1secret", "p2secret", "pw1", "p2a", "p2b"]) expect(message).not.toContain(secret);
  });

  it("config validation refuses several URLs in REDIS_URL, masked", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-redis-url-"));
    writeFileSync(join(dir, "c.json5"), "{}");
    try {
      loadConfig({ file: join(dir, "c.json5"), env: { REDIS_URL: "redis://:p1secret@h1:1,redis://:p2secret@h2:2" } });
      expect.unreachable("several URLs must be refused");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const issues = (err as ConfigError).issues;
      expect(issues.map((i) => i.path)).toEqual(["REDIS_URL"]);
      expect(issues[0]!.message).toMatch(/^one URL only/);
      expect(issues[0]!.message).not.toMatch(/p1secret|p2secret/);
    }
  });
});
