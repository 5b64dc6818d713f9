/**
 * A Redis that takes connections but never answers (a paused redis-server: what a hung or
 * overloaded server, or a dead backend behind a TCP proxy, looks like): every operator command,
 * and `worker` / `start` with that Redis configured, ends within a bound with the reason, instead
 * of hanging silently. The server is a private one on a free port, paused with SIGSTOP.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisAnswers } from "../../src/app/embedded-redis.js";
import { probeRedis } from "../../src/doctor/checks.js";
import { cliEnv, runCli, show, type CliResult } from "../helpers/cli-run.js";
import { tempDir } from "../helpers/context.js";
import { freePort } from "../helpers/redis-server.js";
import { CLI, ROOT } from "../helpers/system.js";

const dir = tempDir("sb-hung");
let server: ChildProcess;
let url: string;
let env: NodeJS.ProcessEnv;
const state = join(dir.dir, "state");

/** A clear Redis error from a command that took this long (ms): it waited once, not forever. */
const BOUND_MS = 12_000;
const NO_REPLY = /connected but no reply \(hung, busy, or not Redis\)/;

beforeAll(async () => {
  const port = await freePort();
  url = `redis://127.0.0.1:${port}`;
  server = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.dir],
    { stdio: "ignore" },
  );
  const deadline = Date.now() + 10_000;
  while (!(await redisAnswers(url, 500))) {
    if (Date.now() > deadline) throw new Error(`private redis-server at ${url} did not answer`);
    await sleep(50);
  }
  process.kill(server.pid!, "SIGSTOP");
  env = cliEnv({ HOME: dir.dir, SWITCHBOARD_STATE_DIR: state, REDIS_URL: url });
});

afterAll(async () => {
  if (server?.pid && server.exitCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    process.kill(server.pid, "SIGCONT");
    server.kill("SIGKILL");
    await exited;
  }
  dir.cleanup();
});

async function timed(args: string[], withEnv = env): Promise<CliResult & { ms: number }> {
  const started = Date.now();
  const r = await runCli(args, withEnv, BOUND_MS + 10_000);
  return { ...r, ms: Date.now() - started };
}

describe("probes", () => {
  it("redisAnswers and the doctor probe give up in time, saying the server took the connection", async () => {
    const started = Date.now();
    expect(await redisAnswers(url, 500)).toBe(false);
    const probe = await probeRedis(url, 800);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(probe.redis).toBeUndefined();
    expect(probe.error).toMatch(NO_REPLY);
    expect(probe.error).toContain("within 800 ms");
  });
});

describe("operator commands end with the reason", () => {
  it("sessions: redis_unavailable, connected but no reply, no log lines", async () => {
    const r = await timed(["sessions"]);
    expect(r.code, show(r)).toBe(1);
    expect(r.ms).toBeLessThan(BOUND_MS);
    expect(r.stderr).toMatch(
      new RegExp(`^error \\[redis_unavailable\\]: Redis does not answer at ${url.replace(/[/.]/g, "\\$&")} \\(`),
    );
    expect(r.stderr).toMatch(NO_REPLY);
    expect(r.stderr.split("\n").filter(Boolean)).toHaveLength(1);
  });

  it("status: Redis DOWN with the reason, exit 1; --json says the same", async () => {
    const r = await timed(["status"]);
    expect(r.code, show(r)).toBe(1);
    expect(r.ms).toBeLessThan(BOUND_MS);
    expect(r.stdout).toMatch(
      new RegExp(`^Redis: {3}DOWN \\(${url.replace(/[/.]/g, "\\$&")}: connected but no reply`, "m"),
    );
    expect(r.stderr).toBe("");
    const j = await timed(["status", "--json"]);
    expect(j.code, show(j)).toBe(1);
    const out = JSON.parse(j.stdout) as { redis: { up: boolean; error: string } };
    expect(out.redis.up).toBe(false);
    expect(out.redis.error).toMatch(NO_REPLY);
  });

  it("doctor: FAIL redis with the reason and what to do, exit 1", async () => {
    const r = await timed(["doctor"]);
    expect(r.code, show(r)).toBe(1);
    expect(r.ms).toBeLessThan(BOUND_MS);
    expect(r.stdout).toMatch(
      /^FAIL {2}redis {4}\S+ does not answer \(connected but no reply \(hung, busy, or not Redis\)/m,
    );
    expect(r.stdout).toContain("→ start Redis, or set REDIS_URL / redis.url");
  });

  it("worker, and start with this Redis configured: refused with the reason, no embedded Redis", async () => {
    const worker = await timed(["worker"]);
    expect(worker.code, show(worker)).toBe(1);
    expect(worker.ms).toBeLessThan(BOUND_MS);
    expect(worker.stderr).toMatch(/^error \[redis_unavailable\]: Redis does not answer at /);
    expect(worker.stderr).toMatch(NO_REPLY);
    const cfg = join(dir.dir, "explicit.json5");
    writeFileSync(cfg, JSON.stringify({ redis: { url }, gateway: { port: 0 } }));
    const start = await timed(["start", "--config", cfg], cliEnv({ HOME: dir.dir, SWITCHBOARD_STATE_DIR: state }));
    expect(start.code, show(start)).toBe(1);
    expect(start.ms).toBeLessThan(BOUND_MS);
    expect(start.stderr).toMatch(NO_REPLY);
    expect(existsSync(join(state, "redis")), "no embedded Redis for an explicit URL").toBe(false);
  });
});

/**
 * `start` with no Redis URL configured, and a hung server at the default 127.0.0.1:6379: in its
 * own network namespace (unshare), so the machine's Redis on 6379 is neither seen nor touched.
 */
it("start with no URL configured treats a hung default Redis as none: it starts its embedded one", () => {
  const unshareArgs = [["-rn"], ["-n"]].find(
    (a) => spawnSync("unshare", [...a, "sh", "-c", "ip link set lo up"], { stdio: "ignore" }).status === 0,
  );
  if (!unshareArgs) throw new Error("this test needs `unshare -rn` or `unshare -n` and `ip` (iproute2)");
  const ns = join(dir.dir, "ns");
  mkdirSync(ns);
  const cfg = join(ns, "switchboard.json5");
  writeFileSync(cfg, JSON.stringify({ redis: { prefix: "hung" }, gateway: { port: 0 } }));
  const script = `
set -u
ip link set lo up
redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --dir "$NS" --daemonize yes --pidfile "$NS/r.pid"
for i in $(seq 1 50); do [ -s "$NS/r.pid" ] && break; sleep 0.1; done
sleep 0.3
trap 'kill -CONT $(cat "$NS/r.pid"); kill -9 $(cat "$NS/r.pid")' EXIT
kill -STOP $(cat "$NS/r.pid")
"$NODE" "$CLI" start --config "$CFG" > "$NS/start.log" 2>&1 &
SB=$!
for i in $(seq 1 200); do grep -q ready "$NS/start.log" && break; kill -0 $SB 2>/dev/null || break; sleep 0.1; done
"$NODE" "$CLI" status --json --config "$CFG" > "$NS/status.json" 2>&1
kill -TERM $SB; wait $SB; echo $? > "$NS/start.code"
`;
  const res = spawnSync("unshare", [...unshareArgs, "bash", "-c", script], {
    cwd: ROOT,
    env: cliEnv({ HOME: ns, SWITCHBOARD_STATE_DIR: join(ns, "state"), NODE: process.execPath, CLI, CFG: cfg, NS: ns }),
    encoding: "utf8",
    timeout: 45_000,
  });
  const log = readFileSync(join(ns, "start.log"), "utf8");
  expect(res.status, `${res.stderr}\n${log}`).toBe(0);
  expect(log).toMatch(
    new RegExp(
      String.raw`no Redis at redis://127\.0\.0\.1:6379 \(connected but no reply \(hung, busy, or not Redis\) ` +
        String.raw`within \d+ ms\): started an embedded redis-server`,
    ),
  );
  expect(log).toContain("switchboard start ready");
  const status = JSON.parse(readFileSync(join(ns, "status.json"), "utf8")) as { redis: { url: string; up: boolean } };
  expect(status.redis.up).toBe(true);
  expect(status.redis.url).not.toBe("redis://127.0.0.1:6379");
  expect(readFileSync(join(ns, "start.code"), "utf8").trim(), log).toBe("0");
}, 60_000);
