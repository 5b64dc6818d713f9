/**
 * The `switchboard` CLI end to end, as real processes (dist/src/cli/main.js): `start` with the
 * runtime file it writes, the operator commands over HTTP and, with no gateway, directly against
 * Redis; `config validate`; `worker --queues` validation; and the embedded Redis default.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisAnswers, startEmbeddedRedis } from "../../src/app/embedded-redis.js";
import { runtimeFilePath, type RuntimeInfo } from "../../src/app/runtime-file.js";
import { displayRedisUrl } from "../../src/config/redis-url.js";
import { QUEUE_NAMES } from "../../src/queues/queue-names.js";
import { RpcCallError } from "../../src/cli/client.js";
import { readClient } from "../../src/cli/direct-client.js";
import { parseConfig } from "../../src/config/index.js";
import { tempDir, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { freePort } from "../helpers/redis-server.js";
import { ROOT, spawnSwitchboard, type ChildHandle } from "../helpers/system.js";
import { cliEnv, runCli, show, type CliResult } from "../helpers/cli-run.js";
import { settle } from "../helpers/settle.js";
import { runInPrivateNetns } from "../helpers/netns-start.js";

const FIXTURES = join(ROOT, "test/fixtures");

/** The permission bits of `dir` and everything under it: the distinct ones of its dirs and of its files. */
function modesUnder(dir: string): { dirs: number[]; files: number[] } {
  const dirs = new Set<number>([statSync(dir).mode & 0o777]);
  const files = new Set<number>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const mode = statSync(join(entry.parentPath, entry.name)).mode & 0o777;
    (entry.isDirectory() ? dirs : files).add(mode);
  }
  return { dirs: [...dirs].sort(), files: [...files].sort() };
}

/** The keys on the test Redis whose names contain `prefix`. */
async function keysOf(prefix: string): Promise<string[]> {
  const admin = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
  try {
    return await admin.keys(`*${prefix}*`);
  } finally {
    admin.disconnect();
  }
}

/** The first reply of the Redis on `port` to a PING sent without any password. */
function noAuthReply(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => s.write("PING\r\n"));
    s.once("data", (d) => {
      s.destroy();
      resolve(String(d).trim());
    });
    s.once("error", reject);
  });
}

// One deployment for the HTTP and direct cases: the test Redis, a fresh prefix, a temp state dir.
const home = tempDir("sb-cli-home");
const state = tempDir("sb-cli-state");
const cfgDir = tempDir("sb-cli-cfg");
const prefix = uniquePrefix("cli");
let configFile: string;
let env: NodeJS.ProcessEnv;
let server: ChildHandle | undefined;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(() => {
  configFile = join(cfgDir.dir, "switchboard.json5");
  // gateway.port 0: the real URL is only known from the runtime file `start` writes.
  writeFileSync(configFile, JSON.stringify({ redis: { url: testRedisUrl(), prefix }, gateway: { port: 0 } }, null, 2));
  env = cliEnv({ HOME: home.dir, SWITCHBOARD_STATE_DIR: state.dir });
});

afterAll(async () => {
  await server?.stop();
  for (const fn of cleanups.reverse()) await fn();
  const r = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
  try {
    const keys = await r.keys(`*${prefix}*`);
    if (keys.length) await r.del(...keys);
  } finally {
    r.disconnect();
  }
  for (const d of [home, state, cfgDir]) d.cleanup();
}, 30_000);

describe("switchboard start + operator commands over HTTP", () => {
  let runtime: RuntimeInfo;

  beforeAll(async () => {
    server = await spawnSwitchboard(["start", "--config", configFile], { ...env } as Record<string, string>);
    runtime = (await settle(
      (): RuntimeInfo | false => {
        const p = runtimeFilePath(state.dir);
        return existsSync(p) && (JSON.parse(readFileSync(p, "utf8")) as RuntimeInfo);
      },
      { what: "the runtime file written by start", timeoutMs: 5000 },
    )) as RuntimeInfo;
  }, 30_000);

  it("writes the runtime file with the real gateway URL (port 0 resolved) and its pid", async () => {
    expect(runtime.pid).toBe(server!.child.pid);
    expect(runtime.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(runtime.gatewayUrl).not.toMatch(/:0$/);
    expect(runtime.redisUrl).toBe(testRedisUrl());
    const health = await fetch(`${runtime.gatewayUrl}/healthz`);
    expect(health.status).toBe(200);
  });

  it("send --wait prints the reply and exits 0", async () => {
    const r = await runCli(["send", "main", "hi", "--wait", "5", "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toBe("echo: hi\n");
  });

  it("history prints the user and assistant lines, --json is valid JSON with messages", async () => {
    const text = await runCli(["history", "main", "--config", configFile], env);
    expect(text.code, show(text)).toBe(0);
    const lines = text.stdout.trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] user: hi$/);
    expect(lines[1]).toMatch(/^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] assistant: echo: hi$/);

    const json = await runCli(["history", "main", "--json", "--config", configFile], env);
    expect(json.code, show(json)).toBe(0);
    const parsed = JSON.parse(json.stdout) as { sessionKey: string; messages: { role: string; content: unknown }[] };
    expect(parsed.sessionKey).toBe("agent:main:main");
    expect(parsed.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(JSON.stringify(parsed.messages[1]!.content)).toContain("echo: hi");
  });

  it("sessions --json lists agent:main:main", async () => {
    const r = await runCli(["sessions", "--json", "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    const parsed = JSON.parse(r.stdout) as { count: number; sessions: { key: string; sessionId: string }[] };
    expect(parsed.sessions.map((s) => s.key)).toEqual(["agent:main:main"]);
    expect(parsed.count).toBe(1);
    expect(parsed.sessions[0]!.sessionId).toMatch(/^[a-z0-9][a-z0-9._-]+$/);
  });

  it("status shows the gateway up, Redis up and a line per queue", async () => {
    const r = await runCli(["status", "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toContain(`Gateway: up at ${runtime.gatewayUrl}\n`);
    expect(r.stdout).toMatch(
      new RegExp(`^Redis: +up \\(${testRedisUrl().replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}, \\d+ ms\\)$`, "m"),
    );
    expect(r.stdout).toMatch(/^Workers: [1-9]\d*$/m);
    expect(r.stdout).toMatch(/^Ready: +\d+ sessions? waiting for a worker slot, \d+ wakes? pending$/m);
    // Aligned tables: a header, a rule of dashes as wide as each column, numbers aligned right.
    const lines = r.stdout.split("\n");
    const header = lines.findIndex((l) => /^queue +waiting +active +delayed +failed +workers$/.test(l));
    expect(header, r.stdout).toBeGreaterThan(0);
    expect(lines[header + 1]).toMatch(/^-+( +-+){5}$/);
    expect(lines[header + 1]!.length).toBe(lines[header]!.length);
    for (const [i, q] of QUEUE_NAMES.entries()) {
      const row = lines[header + 2 + i]!;
      expect(row).toMatch(new RegExp(`^${q} +\\d+ +\\d+ +\\d+ +0 +[1-9]\\d*$`));
      expect(row.length, "right-aligned numbers end where the header ends").toBe(lines[header]!.length);
    }
    expect(r.stdout).toMatch(/^process +host +pid +heartbeat\n-+ +-+ +-+ +-+\nstart +\S+ +\d+ +\d+s ago$/m);
    expect(r.stdout).toMatch(/^recent session +updated\n-+ +-+\nagent:main:main +\d+[smhd] ago$/m);
  });

  it("status --url of the running gateway probes it and reports it up", async () => {
    const r = await runCli(["status", "--json", "--url", runtime.gatewayUrl!, "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    expect((JSON.parse(r.stdout) as { gateway: unknown }).gateway).toEqual({
      url: runtime.gatewayUrl,
      reachable: true,
    });
  });

  it("call sessions.list --params prints the JSON result", async () => {
    const r = await runCli(["call", "sessions.list", "--params", '{"limit":5}', "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    const parsed = JSON.parse(r.stdout) as { count: number; sessions: { key: string }[] };
    expect(parsed.sessions.map((s) => s.key)).toContain("agent:main:main");
  });

  it("call with --params that is not JSON exits 64 (usage) with a clear message", async () => {
    const r = await runCli(["call", "sessions.list", "--params", "not json", "--config", configFile], env);
    expect(r.code, show(r)).toBe(64);
    expect(r.stderr).toMatch(/^error \[invalid_request\]: --params is not valid JSON: .+\n$/);
    expect(r.stdout).toBe("");
  });

  it("call of an unknown method exits 1 and names it", async () => {
    const r = await runCli(["call", "no.such.method", "--config", configFile], env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toContain("unknown method no.such.method");
  });
});

describe("without a gateway: directly against Redis", () => {
  beforeAll(async () => {
    await server?.stop();
    expect(server?.child.exitCode, server?.output()).toBe(0);
    server = undefined;
  }, 30_000);

  it("start removed its runtime file on SIGTERM", () => {
    expect(existsSync(runtimeFilePath(state.dir))).toBe(false);
  });

  it("sessions --json and history still work (same config and prefix)", async () => {
    const [sessions, history, status] = await Promise.all([
      runCli(["sessions", "--json", "--config", configFile], env),
      runCli(["history", "agent:main:main", "--config", configFile], env),
      runCli(["status", "--config", configFile], env),
    ]);
    expect(sessions.code, show(sessions)).toBe(0);
    expect(sessions.stderr).toBe("");
    expect(history.stderr).toBe("");
    expect((JSON.parse(sessions.stdout) as { sessions: { key: string }[] }).sessions.map((s) => s.key)).toEqual([
      "agent:main:main",
    ]);
    expect(history.code, show(history)).toBe(0);
    expect(history.stdout).toMatch(/\] user: hi\n.*\] assistant: echo: hi\n$/);
    // Proof that nothing answered over HTTP: status reports the gateway down but Redis up.
    expect(status.stdout, show(status)).toContain("Gateway: not reachable");
    expect(status.stdout).toMatch(/^Redis: +up /m);
  });

  // Most of a CLI command's start-up is loading modules, BullMQ the largest (src/cli/direct-client.ts).
  it("sessions, history, deadletters list and call of a read method start without loading BullMQ", async () => {
    const hook = join(FIXTURES, "report-bullmq-loads.mjs");
    const traced = { ...env, NODE_OPTIONS: `--import ${hook}` };
    const [sessions, history, letters, call, status] = await Promise.all([
      runCli(["sessions", "--json", "--config", configFile], traced),
      runCli(["history", "agent:main:main", "--config", configFile], traced),
      runCli(["deadletters", "list", "--config", configFile], traced),
      runCli(["call", "sessions.list", "--config", configFile], traced),
      runCli(["status", "--config", configFile], traced),
    ]);
    for (const r of [sessions, history, letters, call]) {
      expect(r.code, show(r)).toBe(0);
      expect(r.stderr, show(r)).toBe("");
    }
    const keys = (out: string) => (JSON.parse(out) as { sessions: { key: string }[] }).sessions.map((s) => s.key);
    expect(keys(sessions.stdout)).toEqual(["agent:main:main"]);
    expect(keys(call.stdout)).toEqual(["agent:main:main"]);
    expect(history.stdout).toMatch(/\] assistant: echo: hi\n$/);
    expect(letters.stdout).toBe("No dead letters.\n");
    // The hook works: status reads the queues' counts, so it loads BullMQ and says so.
    expect(status.stdout, show(status)).toMatch(/^Redis: +up /m);
    expect(status.stderr, show(status)).toMatch(/^bullmq loaded by file:.*\/dist\/src\//m);
  });

  it("status with --url / SWITCHBOARD_URL where nothing listens probes it: not reachable, exit 0", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const [text, json, flag] = await Promise.all([
      runCli(["status", "--config", configFile], { ...env, SWITCHBOARD_URL: url }),
      runCli(["status", "--json", "--config", configFile], { ...env, SWITCHBOARD_URL: url }),
      runCli(["status", "--json", "--url", url, "--config", configFile], env),
    ]);
    expect(text.code, show(text)).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^Gateway: not reachable at ${url.replace(/[.]/g, "\\.")}\nRedis: +up `));
    for (const r of [json, flag]) {
      expect(r.code, show(r)).toBe(0);
      const parsed = JSON.parse(r.stdout) as { gateway: unknown; redis: { up: boolean } };
      expect(parsed.gateway).toEqual({ url, reachable: false });
      expect(parsed.redis.up).toBe(true);
    }
  });

  it("a session that does not exist prints an empty history, not a crash", async () => {
    const r = await runCli(["history", "agent:main:nobody-here", "--config", configFile], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toBe("(no messages in agent:main:nobody-here)\n");
  });

  // Regression: short direct-mode commands used to die ~1 run in 3 with an unhandled
  // "Connection is closed" (a SUBSCRIBE still pending at close) or warn "write EPIPE" (BullMQ's
  // INFO after QUIT). Several runs, each must exit 0 with a clean stderr.
  it("short direct commands exit cleanly every time", async () => {
    const results: CliResult[] = [];
    for (let i = 0; i < 4; i++) {
      results.push(
        ...(await Promise.all([
          runCli(["history", `agent:main:ghost-${i}`, "--config", configFile], env),
          runCli(["sessions", "--agent", "ghost", "--config", configFile], env),
        ])),
      );
    }
    for (const r of results) {
      expect(r.code, show(r)).toBe(0);
      expect(r.stderr, show(r)).toBe("");
    }
  });
});

describe("read-only commands", () => {
  it("leave nothing behind on the Redis they read (no queue meta keys of a deployment never started)", async () => {
    const fresh = uniquePrefix("cli-ro");
    const file = join(cfgDir.dir, "read-only.json5");
    writeFileSync(file, JSON.stringify({ redis: { url: testRedisUrl(), prefix: fresh }, gateway: { port: 0 } }));
    for (const args of [["sessions", "--json"], ["history", "main"], ["status"], ["deadletters", "list"]]) {
      const r = await runCli([...args, "--config", file], env);
      expect(r.code, show(r)).toBeLessThanOrEqual(1); // status: 1 with no gateway running
      expect(r.stderr, show(r)).not.toMatch(/Error|at .*\.js:/);
    }
    expect(await keysOf(fresh)).toEqual([]);
  });
});

describe("the read-only direct client", () => {
  it("answers read methods and refuses any other as internal, writing nothing", async () => {
    const fresh = uniquePrefix("cli-rc");
    const client = readClient(parseConfig({ redis: { url: testRedisUrl(), prefix: fresh } }));
    try {
      expect(await client.rpc("sessions.list", {})).toMatchObject({ count: 0, sessions: [] });
      expect(await client.rpc("chat.history", { sessionKey: "main" })).toEqual({
        sessionKey: "agent:main:main",
        messages: [],
      });
      for (const method of ["sessions.reset", "agent", "deadletters.replay", "status", "toString", "constructor"]) {
        const err = await client.rpc(method, { key: "main" }).catch((e: unknown) => e);
        expect(err, method).toBeInstanceOf(RpcCallError);
        expect((err as RpcCallError).code, method).toBe("internal");
        expect((err as Error).message).toBe(`${method} is not a read method: this command's client only reads`);
      }
    } finally {
      await client.close();
    }
    expect(await keysOf(fresh)).toEqual([]);
  });
});

describe("Redis down", () => {
  it("sessions and history exit 1 with one clear error line, status says DOWN; no stack dumps", async () => {
    const dead = cliEnv({
      HOME: home.dir,
      SWITCHBOARD_STATE_DIR: join(cfgDir.dir, "dead-state"),
      REDIS_URL: "redis://127.0.0.1:1",
    });
    const [sessions, history, status] = await Promise.all([
      runCli(["sessions", "--json"], dead),
      runCli(["history", "main"], dead),
      runCli(["status"], dead),
    ]);
    // The one error line, and nothing else: no JSON log lines about the reconnects before it.
    const lines = (r: CliResult) => r.stderr.split("\n").filter(Boolean);
    // With --json the error is on stdout too, as JSON; without, stdout stays empty.
    expect(JSON.parse(sessions.stdout)).toMatchObject({ ok: false, error: { code: "redis_unavailable" } });
    expect(history.stdout).toBe("");
    for (const r of [sessions, history]) {
      expect(r.code, show(r)).toBe(1);
      expect(lines(r), show(r)).toEqual([
        expect.stringMatching(/^error \[redis_unavailable\]: Redis does not answer at redis:\/\/127\.0\.0\.1:1 /),
      ]);
    }
    expect(status.code, show(status)).toBe(1);
    // The connection's own error, not ioredis's "max retries per request".
    expect(status.stdout).toMatch(
      /^Gateway: not reachable\nRedis: +DOWN \(redis:\/\/127\.0\.0\.1:1: connect ECONNREFUSED 127\.0\.0\.1:1\)\n/,
    );
    expect(lines(status), show(status)).toEqual([]);
  });

  it("never prints the Redis password: errors, status (text and JSON), config validate", async () => {
    const secret = "S3cretRedisPassw0rd";
    const env = cliEnv({
      HOME: home.dir,
      SWITCHBOARD_STATE_DIR: join(cfgDir.dir, "secret-state"),
      REDIS_URL: `redis://default:${secret}@127.0.0.1:1`,
    });
    const bad = cliEnv({ HOME: home.dir, REDIS_URL: `rediss+cluster://admin:${secret}@redis.internal:6379/2` });
    const runs = await Promise.all([
      runCli(["sessions", "--json"], env),
      runCli(["status"], env),
      runCli(["status", "--json"], env),
      runCli(["config", "validate"], bad),
    ]);
    for (const r of runs) expect(r.stdout + r.stderr, show(r)).not.toContain(secret);
    expect(runs[0]!.stderr).toContain("Redis does not answer at redis://default:***@127.0.0.1:1 ");
    expect(JSON.parse(runs[2]!.stdout).redis.url).toBe("redis://default:***@127.0.0.1:1");
    expect(runs[3]!.stderr).toContain("rediss+cluster://admin:***@redis.internal:6379/2");
  });
});

describe("switchboard config validate", () => {
  it("accepts a good file and exits 0", async () => {
    const file = join(FIXTURES, "cli-config-good.json5");
    const r = await runCli(["config", "validate", file], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toBe(`${file}: valid\n`);
    expect(r.stderr).toBe("");
  });

  it("rejects a bad file with every problem as `path: message` on stderr, exit 1", async () => {
    const r = await runCli(["config", "validate", join(FIXTURES, "cli-config-bad.json5")], env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trim().split("\n");
    expect(lines, r.stderr).toHaveLength(3);
    for (const line of lines) expect(line).toMatch(/^\S+: \S.*$/);
    // An unknown key is reported at its own path (with a suggestion when one is close).
    expect(lines.find((l) => l.startsWith("bogusTopLevel: "))).toContain("unknown key");
    expect(lines.find((l) => l.startsWith("session.dmScope: "))).toContain("per-peer");
    expect(lines.find((l) => l.startsWith("session.reset.timezone: "))).toMatch(/time ?zone/i);
  });

  it("an OpenClaw config is valid; keys that change nothing here are listed as warnings", async () => {
    const file = join(cfgDir.dir, "openclaw.json5");
    writeFileSync(
      file,
      JSON.stringify({
        session: { store: "~/.openclaw/agents/{agentId}/sessions/sessions.json", resetTrigers: undefined },
        commands: { native: "auto", ownerAllowFrom: ["telegram:1"] },
      }),
    );
    const r = await runCli(["config", "validate", file], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toContain("valid");
    expect(r.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^warning: session\.store: .*switchboard import openclaw/),
      expect.stringMatching(/^warning: commands\.native: accepted, not acted on/),
    ]);
    const typo = join(cfgDir.dir, "typo.json5");
    writeFileSync(typo, JSON.stringify({ session: { resetTrigers: ["/new"] } }));
    const bad = await runCli(["config", "validate", typo], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('session.resetTrigers: unknown key (did you mean "resetTriggers"?)');
  });

  it("a file that does not exist is a problem too", async () => {
    const r = await runCli(["config", "validate", join(cfgDir.dir, "missing.json5")], env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toMatch(/^\(file\): not found: .*missing\.json5\n$/);
  });
});

describe("switchboard worker --queues", () => {
  it("--help lists every queue", async () => {
    const r = await runCli(["worker", "--help"], env);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout.replace(/\s+/g, " ")).toContain(`comma-separated: ${QUEUE_NAMES.join(",")} (default all)`);
  });

  it("refuses an unknown queue with exit 64 (usage)", async () => {
    const r = await runCli(["worker", "--queues", "bogus", "--config", configFile], env);
    expect(r.code, show(r)).toBe(64);
    expect(r.stderr).toContain("unknown queue(s): bogus");
    expect(r.stdout).not.toContain("ready");
  });

  it("reports the bad queue before (and without) trying Redis", async () => {
    const started = Date.now();
    const r = await runCli(["worker", "--queues", "runs,bogus"], { ...env, REDIS_URL: "redis://127.0.0.1:1" });
    expect(r.code, show(r)).toBe(64);
    expect(r.stderr).toContain("unknown queue(s): bogus");
    expect(r.stderr).not.toContain("Redis does not answer");
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe("embedded Redis", () => {
  it("startEmbeddedRedis starts a private redis-server under the state dir that answers, then stops", async () => {
    const dir = tempDir("sb-embedded");
    cleanups.push(dir.cleanup);
    const embedded = await startEmbeddedRedis(dir.dir);
    cleanups.push(() => embedded.stop());
    // A password of its own: any local user can reach a loopback port.
    expect(embedded.url).toMatch(/^redis:\/\/:[0-9a-f]{48}@127\.0\.0\.1:\d+$/);
    expect(embedded.url).not.toContain(":6379");
    expect(embedded.dataDir).toBe(join(dir.dir, "redis"));
    const password = new URL(embedded.url).password;
    expect(await noAuthReply(Number(new URL(embedded.url).port))).toBe("-NOAUTH Authentication required.");
    const r = new Redis(embedded.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    r.on("error", () => {});
    await r.connect();
    expect(await r.ping()).toBe("PONG");
    await r.set("k", "v");
    expect(await r.config("GET", "dir")).toEqual(["dir", embedded.dataDir]);
    expect(await r.config("GET", "appendonly")).toEqual(["appendonly", "yes"]);
    // Given on stdin, so never on its command line (which `ps` shows to everyone).
    const pid = Number(/^process_id:(\d+)/m.exec(await r.info("server"))![1]);
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(password);
    r.disconnect();
    await settle(() => readdirSync(embedded.dataDir).length > 1, {
      what: "the AOF dir written under the state dir",
      timeoutMs: 5000,
    }); // AOF dir written under the state dir
    // Owner-only, all of it: the data dir, the AOF dir and files, the record holding the password.
    expect(modesUnder(embedded.dataDir)).toEqual({ dirs: [0o700], files: [0o600] });
    expect(readFileSync(join(embedded.dataDir, "embedded.json"), "utf8")).toContain(password);
    await embedded.stop();
    const after = new Redis(embedded.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
      connectTimeout: 1000,
    });
    after.on("error", () => {});
    await expect(after.connect()).rejects.toThrow();
    after.disconnect();
    await embedded.stop(); // idempotent
  });

  it("one redis-server per state dir: a second owner is refused; one left by a killed owner is adopted", async () => {
    const dir = tempDir("sb-embedded-owner");
    cleanups.push(dir.cleanup);
    // The owner: another process, which serves the embedded Redis until it is killed.
    const owner = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const m = await import(${JSON.stringify(join(ROOT, "dist/src/app/embedded-redis.js"))});` +
          `const e = await m.startEmbeddedRedis(${JSON.stringify(dir.dir)}); console.log(e.url);` +
          "setInterval(() => {}, 1000);",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    cleanups.push(() => void owner.kill("SIGKILL"));
    const url = await new Promise<string>((resolve) => owner.stdout!.once("data", (d) => resolve(String(d).trim())));
    const before = new Redis(url, { maxRetriesPerRequest: 0, lazyConnect: true });
    before.on("error", () => {});
    await before.connect();
    await before.set("kept", "yes");
    before.disconnect();

    await expect(startEmbeddedRedis(dir.dir)).rejects.toThrow(/another switchboard start \(pid \d+\) serves/);

    owner.kill("SIGKILL");
    await new Promise((r) => owner.once("exit", r));
    // Its redis-server outlived it; the next start takes it over: same server, same data, same password.
    const adopted = await startEmbeddedRedis(dir.dir);
    cleanups.push(() => adopted.stop());
    expect(adopted.url).toBe(url);
    expect(adopted.notice).toBeUndefined();
    const r = new Redis(adopted.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    r.on("error", () => {});
    await r.connect();
    expect(await r.get("kept")).toBe("yes");
    r.disconnect();
    // The adopter ends it like its own.
    await adopted.stop();
    expect(await redisAnswers(url, 500)).toBe(false);
  });

  it("a redis-server an earlier version left without a password is adopted with its data, and gets one", async () => {
    const dir = tempDir("sb-embedded-old");
    cleanups.push(dir.cleanup);
    const dataDir = join(dir.dir, "redis");
    mkdirSync(dataDir, { mode: 0o755 });
    // As that version ran it: no password, the default umask (a world-readable AOF), its record.
    const port = await freePort();
    const old = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dataDir, "--appendonly", "yes", "--save", ""],
      { stdio: "ignore" },
    );
    cleanups.push(() => void old.kill("SIGKILL"));
    const plain = `redis://127.0.0.1:${port}`;
    await settle(() => redisAnswers(plain, 500), { what: "the old redis-server", timeoutMs: 10_000 });
    const deadOwner = spawnSync(process.execPath, ["-e", ""]).pid;
    writeFileSync(join(dataDir, "embedded.json"), JSON.stringify({ redisPid: old.pid, port, ownerPid: deadOwner }), {
      mode: 0o644,
    });
    // A client of someone else's, connected before the adoption.
    const intruder = new Redis(plain, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    intruder.on("error", () => {});
    await intruder.connect();
    await intruder.set("kept", "yes");
    const aofDir = join(dataDir, "appendonlydir");
    await settle(() => existsSync(aofDir) && readdirSync(aofDir).length > 0, { what: "the old AOF", timeoutMs: 5000 });
    chmodSync(aofDir, 0o755);
    for (const f of readdirSync(aofDir)) chmodSync(join(aofDir, f), 0o644);

    const adopted = await startEmbeddedRedis(dir.dir);
    cleanups.push(() => adopted.stop());
    expect(adopted.notice).toMatch(/earlier version left running without a password: it asks for one now/);
    expect(adopted.url).toMatch(new RegExp(`^redis://:[0-9a-f]{48}@127\\.0\\.0\\.1:${port}$`));
    expect(await noAuthReply(port)).toBe("-NOAUTH Authentication required.");
    expect(await redisAnswers(plain, 500)).toBe(false);
    // The connection opened before it was closed: it cannot carry on without the password.
    await expect(intruder.get("kept")).rejects.toThrow();
    intruder.disconnect();
    const r = new Redis(adopted.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    r.on("error", () => {});
    await r.connect();
    expect(await r.get("kept")).toBe("yes");
    r.disconnect();
    expect(modesUnder(dataDir)).toEqual({ dirs: [0o700], files: [0o600] });
    expect(JSON.parse(readFileSync(join(dataDir, "embedded.json"), "utf8"))).toMatchObject({
      redisPid: old.pid,
      port,
      ownerPid: process.pid,
      password: new URL(adopted.url).password,
    });
    await adopted.stop();
    await settle(() => old.exitCode !== null || old.signalCode !== null, { what: "the adopted server stopped" });
  });

  it("two starts at once decide one after the other: one server per data dir, an old one adopted once", async () => {
    // Both read the record before either wrote it: they each started a server on one AOF, or each
    // gave an old passwordless server its own password and replaced it as dead (start.lock).
    const fresh = tempDir("sb-embedded-race");
    cleanups.push(fresh.cleanup);
    const [a, b] = await Promise.all([startEmbeddedRedis(fresh.dir), startEmbeddedRedis(fresh.dir)]);
    cleanups.push(() => a.stop());
    expect(b.url).toBe(a.url); // the second adopts what the first started (same process here)
    expect(existsSync(join(fresh.dir, "redis", "start.lock"))).toBe(false);
    await a.stop();

    const dir = tempDir("sb-embedded-race-old");
    cleanups.push(dir.cleanup);
    const dataDir = join(dir.dir, "redis");
    mkdirSync(dataDir, { mode: 0o700 });
    const port = await freePort();
    const old = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dataDir, "--appendonly", "no", "--save", ""],
      { stdio: "ignore" },
    );
    cleanups.push(() => void old.kill("SIGKILL"));
    await settle(() => redisAnswers(`redis://127.0.0.1:${port}`, 500), { what: "the old redis-server" });
    const deadOwner = spawnSync(process.execPath, ["-e", ""]).pid;
    writeFileSync(join(dataDir, "embedded.json"), JSON.stringify({ redisPid: old.pid, port, ownerPid: deadOwner }));
    const both = await Promise.all([startEmbeddedRedis(dir.dir), startEmbeddedRedis(dir.dir)]);
    cleanups.push(() => both[0].stop());
    for (const e of both) expect(e.url).toMatch(new RegExp(`^redis://:[0-9a-f]{48}@127\\.0\\.0\\.1:${port}$`));
    expect(both[1].url).toBe(both[0].url);
    expect(both.filter((e) => e.notice).length).toBe(1); // secured once, by the first
    expect(old.exitCode).toBeNull(); // the old server kept serving, nobody replaced it
    expect(await redisAnswers(both[0].url, 500)).toBe(true);
    await both[0].stop();
  });

  /**
   * `start` with no Redis URL configured anywhere: the default (127.0.0.1:6379) answers on this
   * machine and must not be stopped, so the start runs in its own network namespace (unshare),
   * where nothing listens on 6379. Everything that talks to it runs in that namespace too.
   */
  it("start with no redis URL configured starts its own redis-server when nothing answers", async () => {
    const dir = tempDir("sb-embedded-start");
    cleanups.push(dir.cleanup);
    const stateDir = join(dir.dir, "state");
    const out = join(dir.dir, "out");
    const cfg = join(dir.dir, "switchboard.json5");
    // No redis.url; a prefix and a port only. REDIS_URL is unset below.
    writeFileSync(cfg, JSON.stringify({ redis: { prefix: "emb" }, gateway: { port: 0 } }));
    // What the embedded Redis answers a client without its password.
    const noAuth =
      `const s=require("net").connect(+process.argv[1],"127.0.0.1",()=>s.write("PING\\r\\n"));` +
      `s.on("data",(d)=>{console.log(String(d).trim());process.exit(0)});s.on("error",()=>process.exit(1))`;
    const probe =
      `const s=require("net").connect(+process.argv[1],"127.0.0.1");` +
      `s.on("connect",()=>{console.log("open");process.exit(0)});` +
      `s.on("error",()=>{console.log("closed");process.exit(0)})`;
    const script = `
set -u
mkdir -p "$OUT"
ip link set lo up
"$NODE" -e '${probe}' 6379 > "$OUT/6379-before"
"$NODE" "$CLI" start --config "$CFG" > "$OUT/start.log" 2>&1 &
SB=$!
i=0
until grep -q ready "$OUT/start.log"; do
  i=$((i+1))
  if ! kill -0 $SB 2>/dev/null || [ $i -gt 300 ]; then
    echo died-or-timeout > "$OUT/error"; kill -9 $SB 2>/dev/null; exit 0
  fi
  sleep 0.1
done
cp "$STATE/run/switchboard.json" "$OUT/runtime.json"
stat -c %a "$STATE/run/switchboard.json" > "$OUT/runtime.mode"
EPORT=$("$NODE" -e 'console.log(new URL(require(process.argv[1]).redisUrl).port)' "$OUT/runtime.json")
"$NODE" -e '${noAuth}' "$EPORT" > "$OUT/noauth"
"$NODE" "$CLI" send main hi-embedded --wait 10 > "$OUT/send.out" 2>&1; echo $? > "$OUT/send.code"
"$NODE" "$CLI" status --json > "$OUT/status.json" 2> "$OUT/status.err"; echo $? > "$OUT/status.code"
kill -TERM $SB; wait $SB; echo $? > "$OUT/start.code"
PORT=$("$NODE" -e 'console.log(new URL(require(process.argv[1]).redisUrl).port)' "$OUT/runtime.json")
"$NODE" -e '${probe}' "$PORT" > "$OUT/embedded-after"
`;
    const started = Date.now();
    const { res, read, diag, leaked } = runInPrivateNetns(script, { home: dir.dir, stateDir, cfg, out }, 45_000);

    expect(res.status, diag).toBe(0);
    expect(existsSync(join(out, "error")), diag).toBe(false);
    expect(read("6379-before").trim(), "nothing answers at the default URL inside the namespace").toBe("closed");
    const log = read("start.log");
    expect(log, diag).toMatch(
      /no Redis at redis:\/\/127\.0\.0\.1:6379 \(.*ECONNREFUSED.*\): started an embedded redis-server/,
    );
    const runtime = JSON.parse(read("runtime.json")) as RuntimeInfo;
    expect(runtime.redisUrl).toMatch(/^redis:\/\/:[0-9a-f]{48}@127\.0\.0\.1:\d+$/);
    expect(runtime.redisUrl).not.toContain(":6379");
    // The password: in the owner-only runtime file, never in what start prints.
    expect(read("runtime.mode").trim()).toBe("600");
    expect(read("noauth").trim(), "the embedded Redis asks for its password").toBe("-NOAUTH Authentication required.");
    expect(log).toContain(`redis ${displayRedisUrl(runtime.redisUrl)}`);
    expect(log).not.toContain(new URL(runtime.redisUrl).password);
    expect(log).toMatch(/, auth: none, local-only /);
    // Other commands found the embedded Redis (and the gateway) through the runtime file alone.
    expect(read("send.code").trim(), read("send.out")).toBe("0");
    // stdout and stderr together: the runId (stderr, once accepted), then the reply.
    expect(read("send.out")).toMatch(/^queued run [0-9a-f-]{36}\necho: hi-embedded\n$/);
    expect(read("status.code").trim(), read("status.err")).toBe("0");
    const status = JSON.parse(read("status.json")) as {
      gateway: { reachable: boolean; url: string };
      redis: { url: string; up: boolean };
    };
    expect(status.gateway).toEqual({ url: runtime.gatewayUrl, reachable: true });
    expect(status.redis).toMatchObject({ url: displayRedisUrl(runtime.redisUrl), up: true });
    // Data under the state dir, owner-only; clean stop: exit 0, runtime file gone, redis-server stopped.
    expect(readdirSync(join(stateDir, "redis")).length).toBeGreaterThan(0);
    expect(modesUnder(join(stateDir, "redis"))).toEqual({ dirs: [0o700], files: [0o600] });
    expect(read("start.code").trim(), diag).toBe("0");
    expect(existsSync(runtimeFilePath(stateDir))).toBe(false);
    expect(read("embedded-after").trim(), "embedded redis-server stopped with start").toBe("closed");
    expect(leaked, "no redis-server left running").toEqual([]);
    expect(Date.now() - started).toBeLessThan(40_000);
  }, 50_000);

  /**
   * Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the embedded
   * redis-server must not be in it, or it stops at once and the graceful shutdown loses Redis
   * (running turns cannot finish, the process waits out the grace with connection errors). The
   * start runs as the leader of its own process group (`set -m`), in a private network namespace
   * as above, with a turn running when the group gets SIGINT.
   */
  it("SIGINT to start's process group (Ctrl-C) leaves its embedded Redis up until start has shut down", async () => {
    const dir = tempDir("sb-embedded-sigint");
    cleanups.push(dir.cleanup);
    const stateDir = join(dir.dir, "state");
    const out = join(dir.dir, "out");
    const cfg = join(dir.dir, "switchboard.json5");
    // A turn of 6 s: still running when the signal comes (each poll below starts a node process,
    // a second or more on a loaded machine), well within the default grace (25 s).
    const runtime = { kind: "script", rules: [{ delayMs: 6000, reply: "slow-done" }] };
    writeFileSync(
      cfg,
      JSON.stringify({ redis: { prefix: "emb" }, gateway: { port: 0 }, agents: { list: [{ id: "main", runtime }] } }),
    );
    const script = `
set -u -m
mkdir -p "$OUT"
ip link set lo up
"$NODE" "$CLI" start --config "$CFG" > "$OUT/start.log" 2>&1 &
SB=$!
i=0
until grep -q ready "$OUT/start.log"; do
  i=$((i+1))
  if ! kill -0 $SB 2>/dev/null || [ $i -gt 300 ]; then
    echo died-or-timeout > "$OUT/error"; kill -9 $SB 2>/dev/null; exit 0
  fi
  sleep 0.1
done
awk '{print $5}' /proc/$SB/stat > "$OUT/pgid"
echo $SB > "$OUT/pid"
cp "$STATE/redis/embedded.json" "$OUT/embedded.json"
RPID=$("$NODE" -e 'console.log(require(process.argv[1]).redisPid)' "$OUT/embedded.json")
"$NODE" "$CLI" send main slow --json > "$OUT/send.json" 2>&1
RUN=$("$NODE" -e 'console.log(require(process.argv[1]).runId)' "$OUT/send.json")
i=0
P='{"runId":"'$RUN'","timeoutMs":0}'
until "$NODE" "$CLI" call agent.wait --params "$P" 2>&1 | grep -q '"runStatus": *"running"'; do
  i=$((i+1)); if [ $i -gt 50 ]; then echo not-running > "$OUT/error"; break; fi; sleep 0.1
done
T0=$(date +%s%N)
kill -INT -- -$SB
wait $SB; echo $? > "$OUT/start.code"
echo $(( ($(date +%s%N) - T0) / 1000000 )) > "$OUT/shutdown.ms"
if kill -0 $RPID 2>/dev/null; then echo alive; else echo gone; fi > "$OUT/redis-after"
`;
    const { res, read, diag, leaked } = runInPrivateNetns(script, { home: dir.dir, stateDir, cfg, out }, 60_000);
    const log = read("start.log");

    expect(res.status, diag).toBe(0);
    expect(read("error"), diag).toBe("(missing error)");
    expect(read("pgid").trim(), "start leads its own process group").toBe(read("pid").trim());
    // Redis answered all through the shutdown: no connection errors, the running turn finished
    // (not handed back after the grace), and start exited cleanly, then stopped Redis itself.
    expect(log, diag).toContain("SIGINT: shutting down");
    expect(log, diag).not.toMatch(/ECONNREFUSED 127\.0\.0\.1:(?!6379)|connection error|handing running turns back/);
    expect(read("start.code").trim(), diag).toBe("0");
    expect(Number(read("shutdown.ms")), diag).toBeLessThan(15_000);
    const transcript = readdirSync(join(stateDir, "agents/main/sessions"))
      .map((f) => readFileSync(join(stateDir, "agents/main/sessions", f), "utf8"))
      .join("");
    expect(transcript, diag).toContain('"text":"slow-done"');
    expect(read("redis-after").trim(), "embedded redis-server stopped after start").toBe("gone");
    expect(existsSync(join(stateDir, "redis", "embedded.json")), "stopped by start's stop()").toBe(false);
    expect(leaked, "no redis-server left running").toEqual([]);
  }, 70_000);

  it("an explicitly configured Redis that does not answer is an error, never replaced by an embedded one", async () => {
    const dir = tempDir("sb-explicit");
    cleanups.push(dir.cleanup);
    const cfg = join(dir.dir, "switchboard.json5");
    writeFileSync(cfg, JSON.stringify({ redis: { url: "redis://127.0.0.1:1" }, gateway: { port: 0 } }));
    const r = await runCli(
      ["start", "--config", cfg],
      cliEnv({ HOME: dir.dir, SWITCHBOARD_STATE_DIR: join(dir.dir, "state") }),
    );
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toContain("Redis does not answer at redis://127.0.0.1:1");
    expect(existsSync(join(dir.dir, "state", "redis"))).toBe(false);
  });
});
