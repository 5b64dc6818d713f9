/**
 * The pure parts of `switchboard doctor` and the CLI's output: verdicts, clock and process
 * judgements, filesystem names, aligned tables, config problems blamed on environment variables.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { loadConfig } from "../../src/config/load.js";
import type { ConfigError } from "../../src/errors/index.js";
import { configFingerprint } from "../../src/deployment/fingerprint.js";
import type { LiveProcess } from "../../src/deployment/process-registry.js";
import {
  infoField,
  judgeAlive,
  judgeClocks,
  judgeProcesses,
  MAX_CLOCK_SKEW_MS,
  versionBelow,
} from "../../src/doctor/checks.js";
import { filesystemName, filesystemNote, formatBytes, parseDfType } from "../../src/doctor/filesystem.js";
import { formatReport, verdict } from "../../src/doctor/report.js";
import { formatTable } from "../../src/cli/output.js";

const NOW = 1_800_000_000_000;
const config = parseConfig({ agents: { list: [{ id: "main" }] } });
function proc(over: Partial<LiveProcess>): LiveProcess {
  return {
    id: "x",
    role: "worker",
    host: "h1",
    pid: 10,
    version: "1.0.0",
    prefix: "sb",
    fingerprint: configFingerprint(config),
    forced: false,
    startedAt: NOW - 60_000,
    skewMs: 0,
    heartbeatAt: NOW - 1000,
    ...over,
  };
}

describe("doctor verdict and report", () => {
  it("healthy with warnings; unhealthy names every failure on its last line", () => {
    const ok = [
      { check: "redis", level: "ok" as const, message: "up" },
      { check: "queues", level: "warn" as const, message: "2 failed", fix: "look" },
    ];
    expect(verdict(ok).healthy).toBe(true);
    expect(formatReport(ok)).toBe(
      "ok    redis   up\nwarn  queues  2 failed\n              → look\nhealthy (1 warning)\n",
    );
    const bad = [
      ...ok,
      { check: "clock", level: "fail" as const, message: "skew", fix: "ntp" },
      { check: "storage", level: "fail" as const, message: "read-only" },
    ];
    expect(verdict(bad).healthy).toBe(false);
    expect(formatReport(bad).split("\n").at(-2)).toBe("unhealthy: clock: skew; storage: read-only");
  });

  it("clocks: this host and every registered process within the limit, or a failure naming who", () => {
    expect(judgeClocks(12, [proc({ skewMs: -40 })]).map((f) => f.level)).toEqual(["ok"]);
    const far = judgeClocks(-(MAX_CLOCK_SKEW_MS + 500), [proc({ skewMs: 5000, role: "gateway", pid: 77, host: "h9" })]);
    expect(far.filter((f) => f.level === "fail").map((f) => f.message)).toEqual([
      `this host is ${MAX_CLOCK_SKEW_MS + 500} ms behind Redis (over ${MAX_CLOCK_SKEW_MS} ms)`,
      `gateway pid 77 on h9 is 5000 ms ahead of Redis (over ${MAX_CLOCK_SKEW_MS} ms)`,
    ]);
  });

  it("processes: agreeing ones are fine; a group with other agents fails; this config differing only warns", () => {
    expect(judgeProcesses(config, [proc({}), proc({ role: "gateway", pid: 11 })], NOW).map((f) => f.level)).toEqual([
      "ok",
    ]);
    const other = configFingerprint(parseConfig({ agents: { list: [{ id: "main" }, { id: "helper" }] } }));
    const split = judgeProcesses(config, [proc({}), proc({ pid: 11 }), proc({ pid: 12, fingerprint: other })], NOW);
    const fail = split.find((f) => f.level === "fail");
    expect(fail?.message).toBe(
      "worker pid 12 on h1 runs other agents/runtimes/settings than worker pid 10 on h1, worker pid 11 on h1: " +
        'agent "helper": configured here, not in the deployment',
    );
    const mine = judgeProcesses(parseConfig({ agents: { list: [{ id: "main" }, { id: "helper" }] } }), [proc({})], NOW);
    expect(mine.map((f) => f.level)).toEqual(["ok", "warn"]);
    expect(mine[1]!.message).toContain('agent "helper": configured here, not in the deployment');
    // Other prefixes are listed, never judged against this config.
    const others = judgeProcesses(config, [proc({ prefix: "zz", fingerprint: other })], NOW);
    expect(others).toEqual([
      { check: "processes", level: "ok", message: 'prefix "sb": none; other prefixes on this Redis: "zz"' },
    ]);
    const stale = judgeProcesses(config, [proc({ heartbeatAt: NOW - 12_000 })], NOW);
    expect(stale[1]).toMatchObject({
      level: "warn",
      message: "worker pid 10 on h1: last heartbeat 12 s ago (every 5 s expected)",
    });
  });

  it("--alive: a fresh heartbeat from this host and role, else why not", () => {
    expect(judgeAlive("worker", "h1", "sb", [proc({})], NOW).level).toBe("ok");
    expect(judgeAlive("worker", "h1", "sb", [proc({ role: "start" })], NOW).level).toBe("ok");
    expect(judgeAlive("worker", "h2", "sb", [proc({})], NOW)).toMatchObject({
      level: "fail",
      message: 'no switchboard worker process of prefix "sb" registered from host h2',
    });
    expect(judgeAlive("gateway", "h1", "sb", [proc({})], NOW).level).toBe("fail");
    expect(judgeAlive("worker", "h1", "other", [proc({})], NOW).level).toBe("fail");
    expect(judgeAlive("worker", "h1", "sb", [proc({ heartbeatAt: NOW - 11_000 })], NOW)).toMatchObject({
      level: "fail",
      message: "worker pid 10 on h1 has not sent a heartbeat for 11 s",
    });
  });

  it("Redis versions and INFO fields", () => {
    expect(versionBelow("6.0.16", "6.2.0")).toBe(true);
    expect(versionBelow("7.2.4", "6.2.0")).toBe(false);
    expect(versionBelow("6.2.0", "6.2.0")).toBe(false);
    expect(versionBelow("10.0.0", "6.2.0")).toBe(false);
    expect(infoField("# Server\r\nredis_version:7.2.4\r\nmaxmemory_policy:allkeys-lru\r\n", "maxmemory_policy")).toBe(
      "allkeys-lru",
    );
  });

  it("filesystems: names by statfs magic, df -T as a fallback, and what they mean here", () => {
    expect(filesystemName(0xef53)).toBe("ext4");
    expect(filesystemName(0x6969)).toBe("nfs");
    expect(filesystemName(0x794c7630)).toBe("overlay");
    expect(filesystemName(0x12345)).toBeUndefined();
    expect(
      parseDfType(
        "Filesystem     Type  1024-blocks  Used Available Capacity Mounted on\n/dev/sda1      ext4  1000 10 990 1% /\n",
      ),
    ).toBe("ext4");
    expect(filesystemNote("tmpfs")?.level).toBe("warn");
    expect(filesystemNote("overlay")?.note).toContain("mount a volume");
    expect(filesystemNote("nfs")).toEqual({
      level: "ok",
      note: "network filesystem: workers on several hosts can share it",
    });
    expect(filesystemNote("ext4")).toBeUndefined();
    expect(formatBytes(74 * 1024 ** 3 + 1)).toBe("74 GiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
  });
});

describe("formatTable", () => {
  it("aligns columns, numbers to the right, and marks cut cells", () => {
    const t = formatTable(
      [
        { key: "a", n: 5 },
        { key: "b".repeat(70), n: 12345 },
      ],
      ["key", "n"],
    );
    const lines = t.trimEnd().split("\n");
    expect(lines[0]).toBe(`key${" ".repeat(57)}      n`);
    expect(lines[1]).toBe(`${"-".repeat(60)}  -----`);
    expect(lines[2]).toBe(`a${" ".repeat(59)}      5`);
    expect(lines[3]).toBe(`${"b".repeat(59)}…  12345`);
  });
});

describe("config problems from the environment", () => {
  it("name the variable, not just the config path", () => {
    const issues = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig({ env: { HOME: "/nonexistent-home", ...env } });
      } catch (err) {
        return (err as ConfigError).issues;
      }
      throw new Error("expected a ConfigError");
    };
    expect(issues({ SWITCHBOARD_PORT: "abc" })).toEqual([
      { path: "SWITCHBOARD_PORT", message: 'must be a port number 0-65535 (got "abc"; it sets gateway.port)' },
    ]);
    expect(issues({ SWITCHBOARD_PORT: "70000" })[0]!.path).toBe("SWITCHBOARD_PORT");
    expect(issues({ REDIS_URL: "localhost:6379" })).toEqual([
      {
        path: "REDIS_URL",
        message:
          'must be a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL (got "localhost:6379"; ' +
          "it sets redis.url)",
      },
    ]);
    expect(issues({ SWITCHBOARD_TOKEN: "short" })).toEqual([
      { path: "SWITCHBOARD_TOKEN", message: "use at least 8 characters (got (hidden); it sets gateway.auth.token)" },
    ]);
    expect(loadConfig({ env: { HOME: "/nonexistent-home", SWITCHBOARD_PORT: " 8080 " } }).config.gateway.port).toBe(
      8080,
    );
  });
});
