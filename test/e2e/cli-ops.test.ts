/**
 * Operator-facing behaviour of the CLI, as real processes on a private redis-server (the process
 * registry is Redis-wide, so a shared Redis would show other test files' processes):
 * - deployment identity: the start-up banner names the Redis and who shares it; a worker whose
^ *   agents/runtimes/settings differ from the running deployment's is refused unless --force;
 * - `start` prints each line once;
 * - `switchboard doctor`: healthy and the ways it is not;
 * - errors that say what to do; output into a closed pipe; a spinner on a terminal only.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServices } from "../../src/app/services.js";
import { parseConfig, type ConfigInput } from "../../src/config/index.js";
import { configFingerprint } from "../../src/deployment/fingerprint.js";
import {
  heartbeatEveryMs,
  listProcesses,
  REGISTRY_TTL_MS,
  type ProcessRecord,
} from "../../src/deployment/process-registry.js";
import { createRpcMethods } from "../../src/rpc/methods.js";
import { REGISTRY_KEYS } from "../../src/storage/redis-keys.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { tempDir, uniquePrefix } from "../helpers/context.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { CLI, spawnSwitchboard, type ChildHandle } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

// Up before the suites are collected: the deployments below are written at collection time.
const redis: PrivateRedis = await startPrivateRedis();
const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
const dirs: { cleanup: () => void }[] = [];
const children: ChildHandle[] = [];

afterAll(async () => {
  await Promise.allSettled(children.map((c) => c.kill9()));
  admin.disconnect();
  await redis.cleanup();
  for (const d of dirs) d.cleanup();
}, 30_000);

interface Deployment {
  file: string;
  prefix: string;
  state: string;
  env: NodeJS.ProcessEnv;
  /** Config input as written (for in-process services on the same deployment). */
  input: ConfigInput;
}

const SCRIPTED = {
  agents: {
    list: [{ id: "main", runtime: { kind: "script" as const, rules: [{ reply: "the deployment's agent" }] } }],
  },
};

function deployment(extra: ConfigInput = {}, prefix = uniquePrefix("ops")): Deployment {
  const d = tempDir("sb-ops");
  dirs.push(d);
  const state = extra.storage?.dir ?? join(d.dir, "state");
  const input: ConfigInput = {
    ...extra,
    redis: { url: redis.url, prefix },
    storage: { ...(extra.storage ?? {}), dir: state },
    gateway: { port: 0, ...(extra.gateway ?? {}) },
  };
  const file = join(d.dir, `switchboard-${prefix}.json5`);
  writeFileSync(file, JSON.stringify(input, null, 2));
  return { file, prefix, state, input, env: cliEnv({ HOME: d.dir, SWITCHBOARD_STATE_DIR: state }) };
}

/** Same deployment (prefix, storage), another agent list: what a newcomer's laptop config looks like. */
function sibling(of: Deployment, extra: ConfigInput): Deployment {
  return deployment({ ...extra, storage: { dir: of.state } }, of.prefix);
}

async function spawn(args: string[], d: Deployment, extraEnv: Record<string, string> = {}): Promise<ChildHandle> {
  const child = await spawnSwitchboard(args, { ...(d.env as Record<string, string>), ...extraEnv });
  children.push(child);
  return child;
}

/** The registry's records, as `switchboard doctor` and new processes see them. */
async function registered(): Promise<ProcessRecord[]> {
  return Object.values(await admin.hgetall(REGISTRY_KEYS.records)).map((j) => JSON.parse(j) as ProcessRecord);
}

describe("deployment identity", () => {
  const a = deployment(SCRIPTED);
  let start: ChildHandle;

  it("start names the Redis it uses and that no other Switchboard process shares it", async () => {
    start = await spawn(["start", "--config", a.file], a);
    expect(start.output()).toContain(
      `switchboard start uses redis ${redis.url}, prefix "${a.prefix}": no other Switchboard process uses it\n`,
    );
    const mine = (await registered()).filter((r) => r.prefix === a.prefix);
    expect(mine).toEqual([
      expect.objectContaining({
        role: "start",
        pid: start.child.pid,
        forced: false,
        fingerprint: configFingerprint(parseConfig(a.input)),
      }),
    ]);
  }, 30_000);

  it("a worker with the same agents joins and says whom it shares Redis with", async () => {
    const w = await spawn(["worker", "--config", a.file], a);
    expect(w.output()).toContain(
      `prefix "${a.prefix}": SHARED with 1 other Switchboard process: ` +
        `1 start on prefix "${a.prefix}" (this deployment)\n`,
    );
    await w.stop();
    expect(w.child.exitCode).toBe(0);
    // A clean stop leaves the registry at once (a killed process expires after the TTL).
    expect((await registered()).map((r) => r.pid)).not.toContain(w.child.pid);
  }, 30_000);

  it("a worker whose agents differ is refused, naming each difference; it takes no runs", async () => {
    const b = sibling(a, { agents: { list: [{ id: "main" }, { id: "helper" }] } });
    const r = await runCli(["worker", "--config", b.file], b.env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toContain(
      "error [deployment_mismatch]: this config's agents/runtimes/settings differ from the running deployment " +
        `(prefix ` +
        `"${a.prefix}": start pid ${start.child.pid} on `,
    );
    expect(r.stderr).toContain('  - agent "helper": configured here, not in the deployment\n');
    expect(r.stderr).toMatch(
      / {2}- agent "main": runtime here echo \[[0-9a-f]+\], deployment script \(1 rule\) \[[0-9a-f]+\]\n/,
    );
    expect(r.stderr).toContain("--force");
    expect(r.stderr).not.toContain("ready");
    // Every message is answered by the deployment's agent, never by an echo from the refused one.
    // Three CLI processes at once: each is a separate session, so they do not wait on each other.
    const sends = await Promise.all(
      [0, 1, 2].map((i) => runCli(["send", `peer-${i}`, `hello ${i}`, "--wait", "10", "--config", a.file], a.env)),
    );
    for (const sent of sends) expect(sent.stdout, show(sent)).toBe("the deployment's agent\n");
  }, 60_000);

  it("a worker with the same agents but another session.sendPolicy is refused, naming the setting", async () => {
    const b = sibling(a, {
      ...SCRIPTED,
      session: { sendPolicy: { rules: [{ action: "deny", match: { channel: "ops" } }] } },
    });
    const r = await runCli(["worker", "--config", b.file], b.env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toContain("error [deployment_mismatch]");
    expect(r.stderr).toMatch(/ {2}- session\.sendPolicy: set here \[[0-9a-f]{12}\], not set in the deployment\n/);
    expect(r.stderr).not.toContain('agent "main"');
  }, 30_000);

  it("--force starts it anyway, says so, and does not lock the deployment's own config out", async () => {
    const b = sibling(a, { agents: { list: [{ id: "main" }, { id: "helper" }] } });
    const forced = await spawn(["worker", "--config", b.file, "--force"], b);
    expect(forced.output()).toContain(
      "(started with --force: its agents/runtimes/settings differ from the deployment's)",
    );
    expect((await registered()).find((r) => r.pid === forced.child.pid)).toMatchObject({ forced: true });
    const again = await spawn(["worker", "--config", a.file], a);
    expect(again.output()).toContain("SHARED with 2 other Switchboard processes");
    await Promise.all([forced.stop(), again.stop()]);
    // Both left cleanly: the next test counts this deployment's processes.
    expect([forced.child.exitCode, again.child.exitCode], forced.output() + again.output()).toEqual([0, 0]);
    const left = (await registered()).filter((r) => r.pid === forced.child.pid || r.pid === again.child.pid);
    expect(left, "records of stopped workers").toEqual([]);
  }, 60_000);

  it("another prefix is another deployment: not refused, and named as sharing the Redis", async () => {
    const c = deployment({ agents: { list: [{ id: "other" }] } });
    const w = await spawn(["worker", "--config", c.file], c);
    expect(w.output()).toMatch(
      new RegExp(
        `SHARED with \\d+ other Switchboard process(es)?: .*1 start on prefix "${a.prefix}" \\(another deployment\\)`,
      ),
    );
    await w.stop();
  }, 30_000);

  describe("switchboard doctor", () => {
    it("healthy deployment: every check ok, exit 0, --json agrees", async () => {
      const r = await runCli(["doctor", "--config", a.file], a.env);
      expect(r.code, show(r)).toBe(0);
      const lines = r.stdout.trimEnd().split("\n");
      expect(lines[0]).toBe(`ok    config     ${a.file}`);
      expect(r.stdout).toMatch(
        new RegExp(
          `^ok {4}redis {6}${redis.url.replace(/[/.]/g, "\\$&")}: Redis \\d+\\.\\d+\\.\\d+, ping \\d+ ms, ` +
            `maxmemory-policy noeviction$`,
          "m",
        ),
      );
      expect(r.stdout).toMatch(
        new RegExp(`^ok {4}storage {4}${a.state.replace(/[/.]/g, "\\$&")} writable, \\S+, .* free of `, "m"),
      );
      expect(r.stdout).toMatch(/^ok {4}queues {5}runs 1 worker, 0 waiting, 0 failed; /m);
      expect(r.stdout).toContain(`ok    processes  prefix "${a.prefix}": 1 start`);
      expect(r.stdout).toMatch(
        /^ok {4}clock {6}this host is \d+ ms (ahead of|behind) Redis; registered processes within \d+ ms of it$/m,
      );
      expect(r.stdout).toMatch(/^ok {4}gateway {4}http:\/\/127\.0\.0\.1:\d+ ready$/m);
      expect(lines.at(-1)).toBe("healthy");
      const json = await runCli(["doctor", "--json", "--config", a.file], a.env);
      const parsed = JSON.parse(json.stdout) as { healthy: boolean; findings: { check: string; level: string }[] };
      expect(parsed.healthy).toBe(true);
      expect(new Set(parsed.findings.map((f) => f.check))).toEqual(
        new Set(["config", "redis", "storage", "queues", "processes", "clock", "gateway"]),
      );
      expect(parsed.findings.every((f) => f.level === "ok")).toBe(true);
    }, 30_000);

    it("--alive: exit 0 while a process of that role on this host heartbeats", async () => {
      const r = await runCli(["doctor", "--alive", "worker", "--config", a.file], a.env);
      expect(r.code, show(r)).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(`^ok {4}alive {2}start pid ${start.child.pid} on \\S+: heartbeat \\d+ s ago\\nhealthy\\n$`),
      );
      // A usage error (64), not 1: a mistyped role must not read as a dead worker.
      const bad = await runCli(["doctor", "--alive", "bogus", "--config", a.file], a.env);
      expect(bad.code).toBe(64);
      expect(bad.stderr).toContain("--alive must be one of worker, gateway, start, any");
    }, 30_000);

    it("a process whose clock is off fails the clock check, naming it", async () => {
      const far: ProcessRecord = {
        id: "far-host:4242:test",
        role: "worker",
        host: "far-host",
        pid: 4242,
        version: "0.1.0",
        prefix: a.prefix,
        fingerprint: configFingerprint(parseConfig(a.input)),
        forced: false,
        startedAt: Date.now(),
        skewMs: 5000,
      };
      // Registered exactly as that process's heartbeat would: record + expiry on Redis's clock.
      const [s] = await admin.time();
      await admin
        .multi()
        .hset(REGISTRY_KEYS.records, far.id, JSON.stringify(far))
        .zadd(REGISTRY_KEYS.expiries, Number(s) * 1000 + REGISTRY_TTL_MS, far.id)
        .exec();
      try {
        const r = await runCli(["doctor", "--config", a.file], a.env);
        expect(r.code, show(r)).toBe(1);
        expect(r.stdout).toContain(
          "FAIL  clock      worker pid 4242 on far-host is 5000 ms ahead of Redis (over 1000 ms)\n",
        );
        expect(r.stdout).toContain("→ synchronise the clocks (NTP");
        expect(r.stdout.trimEnd().split("\n").at(-1)).toBe(
          "unhealthy: clock: worker pid 4242 on far-host is 5000 ms ahead of Redis (over 1000 ms)",
        );
      } finally {
        await admin.multi().hdel(REGISTRY_KEYS.records, far.id).zrem(REGISTRY_KEYS.expiries, far.id).exec();
      }
    }, 30_000);

    it("no worker on the runs queue, storage that cannot be written: unhealthy with both reasons", async () => {
      const blocker = join(a.state, "..", "not-a-dir");
      writeFileSync(blocker, "a file where a directory should be");
      const d = deployment({ storage: { dir: join(blocker, "state") } });
      const r = await runCli(["doctor", "--config", d.file], d.env);
      expect(r.code, show(r)).toBe(1);
      expect(r.stdout).toMatch(/^FAIL {2}storage {4}\S+\/not-a-dir\/state is not writable: ENOTDIR/m);
      expect(r.stdout).toContain(
        "FAIL  queues     no worker consumes the runs queue: messages are queued but no turn runs\n",
      );
      expect(r.stdout).toContain("→ start one: switchboard worker (or switchboard start)");
      const last = r.stdout.trimEnd().split("\n").at(-1)!;
      expect(last).toMatch(/^unhealthy: storage: .*not writable.*; queues: no worker consumes the runs queue/);
    }, 30_000);

    it("Redis down: says so and what to do, exit 1", async () => {
      const d = deployment();
      const r = await runCli(["doctor"], { ...d.env, REDIS_URL: "redis://127.0.0.1:1" });
      expect(r.code, show(r)).toBe(1);
      expect(r.stdout).toMatch(
        new RegExp(
          String.raw`^FAIL {2}redis {4}redis:\/\/127\.0\.0\.1:1 does not answer \(.*ECONNREFUSED.*\)\n +` +
            String.raw`→ start Redis, or set REDIS_URL \/ redis\.url in `,
          "m",
        ),
      );
      expect(r.stdout).toMatch(/^ok {4}storage /m);
    }, 30_000);
  });

  it("start stopped with SIGTERM leaves the registry", async () => {
    await start.stop();
    expect(start.child.exitCode).toBe(0);
    expect((await registered()).map((r) => r.pid)).not.toContain(start.child.pid);
  }, 30_000);
});

describe("start prints each line once", () => {
  it("ready, the Redis banner and a config warning appear once each, not also as JSON log lines", async () => {
    const d = deployment({ commands: { native: "auto" } });
    const s = await spawn(["start", "--config", d.file], d, { LOG_LEVEL: "info" });
    await s.stop();
    const lines = s.output().split("\n").filter(Boolean);
    const count = (re: RegExp) => lines.filter((l) => re.test(l)).length;
    expect(count(/ready/), s.output()).toBe(1);
    expect(count(/uses redis/)).toBe(1);
    expect(count(/commands\.native/)).toBe(1);
    expect(
      lines.filter((l) => lines.indexOf(l) !== lines.lastIndexOf(l)),
      "no line printed twice",
    ).toEqual([]);
  }, 30_000);
});

describe("errors that say what to do", () => {
  const d = deployment();

  it("send with no worker running: the timeout says no worker consumes the runs queue", async () => {
    const r = await runCli(["send", "main", "anyone there?", "--wait", "1", "--config", d.file], d.env);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(
        "^queued run ([0-9a-f-]+)\n" +
          "run \\1: timeout: no worker is consuming the runs queue: " +
          String.raw`the run waits until one starts \(switchboard worker, or switchboard start\)\n$`,
      ),
    );
  });

  it("a config error names the file; a bad SWITCHBOARD_PORT names the variable", async () => {
    const bad = join(d.state, "..", "typo.json5");
    writeFileSync(bad, "{ gatway: { port: 1 } }");
    const r = await runCli(["sessions", "--config", bad], d.env);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toBe(
      `error [invalid_config]: config file ${bad}:\n  gatway: unknown key (did you mean "gateway"?)\n`,
    );
    const port = await runCli(["sessions", "--config", d.file], { ...d.env, SWITCHBOARD_PORT: "abc" });
    expect(port.code, show(port)).toBe(1);
    expect(port.stderr).toBe(
      `error [invalid_config]: config file ${d.file}:\n  SWITCHBOARD_PORT: ` +
        `must be a port number 0-65535 (got "abc"; it sets gateway.port)\n`,
    );
  });

  it("import openclaw from a file, or a dir with no session store, fails and says what it looked for", async () => {
    const notDir = await runCli(["import", "openclaw", "/etc/hostname", "--config", d.file], d.env);
    expect(notDir.code, show(notDir)).toBe(1);
    expect(notDir.stderr).toContain("not a directory: /etc/hostname");
    const empty = tempDir("sb-import-empty");
    try {
      const r = await runCli(["import", "openclaw", empty.dir, "--no-progress", "--config", d.file], d.env);
      expect(r.code, show(r)).toBe(1);
      expect(r.stderr).toContain(`no OpenClaw session store under ${empty.dir}`);
    } finally {
      empty.cleanup();
    }
  });

  it("send --wait with a bad value is refused before anything is sent", async () => {
    for (const bad of ["-1", "abc", "601"]) {
      const r = await runCli(["send", "main", "never sent", "--wait", bad, "--url", "http://127.0.0.1:1"], d.env);
      expect(r.code, show(r)).toBe(64); // usage
      // Refused before connecting: the closed --url is never tried.
      expect(r.stderr).toBe(`error [invalid_request]: --wait must be a number of seconds from 0 to 600 (got ${bad})\n`);
    }
  });

  it("a gateway that does not answer at --url, a Redis that does not answer: what to start or fix", async () => {
    const closed = await freePort();
    const gw = await runCli(["send", "main", "hi", "--url", `http://127.0.0.1:${closed}`], d.env);
    expect(gw.code, show(gw)).toBe(1);
    expect(gw.stderr).toBe(
      `error [gateway_unreachable]: the gateway does not answer at http://127.0.0.1:${closed} ` +
        `(ECONNREFUSED). Start one (\`switchboard start\` or \`switchboard gateway\`) ` +
        `or fix --url / SWITCHBOARD_URL; without --url, sessions, history and status read Redis directly.\n`,
    );
    const rd = await runCli(["sessions"], { ...d.env, REDIS_URL: "redis://127.0.0.1:1" });
    expect(rd.code, show(rd)).toBe(1);
    const line = rd.stderr.split("\n").find((l) => l.startsWith("error"));
    expect(line).toMatch(
      new RegExp(
        String.raw`^error \[redis_unavailable\]: Redis does not answer at redis:\/\/127\.0\.0\.1:1 ` +
          String.raw`\(connect ECONNREFUSED 127\.0\.0\.1:1\)\. Start Redis .*REDIS_URL or redis\.url`,
      ),
    );
  });
});

describe("output into a pipe that closes early", () => {
  const d = deployment();

  beforeAll(async () => {
    // Enough sessions that the table outgrows a pipe buffer: the writer must meet the closed end.
    const svc = createServices(parseConfig(d.input), { role: "cli" });
    const rpc = createRpcMethods(svc);
    for (let i = 0; i < 1200; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) => rpc.agent!({ sessionKey: `reader-${i + j}`, message: "x" })),
      );
    }
    await svc.close();
  }, 60_000);

  it("`sessions --all | head -3`, `history | head -n 0`, `status | head -n 0`: exit 0, no EPIPE", () => {
    for (const [cmd, reader, lines] of [
      ["sessions --all", "head -3", 3],
      ["history reader-1", "head -n 0", 0],
      ["status", "head -n 0", 0],
    ] as const) {
      const script = [
        `set -o pipefail; "$NODE" "$CLI" ${cmd} --config "$CFG" 2>"$ERR" | ${reader};`,
        `echo "exit $?"; cat "$ERR"`,
      ].join(" ");
      const err = join(d.state, "..", "stderr.txt");
      const res = spawnSync("bash", ["-c", script], {
        env: { ...d.env, NODE: process.execPath, CLI, CFG: d.file, ERR: err },
        encoding: "utf8",
        timeout: 30_000,
      });
      const out = res.stdout.split("\n");
      expect(out.slice(0, lines), `${cmd} | ${reader}`).toHaveLength(lines);
      if (lines) expect(out[0]).toMatch(/^key +kind +channel +updated +sessionId +tokens$/);
      expect(out.slice(lines).join("\n"), `${cmd} | ${reader}: exit status and stderr`).toBe("exit 0\n");
    }
  }, 60_000);
});

describe("progress on a terminal", () => {
  const d = deployment();

  it("a command over a second shows a spinner on a TTY, erased before its own output; none when piped", async () => {
    const hasScript = spawnSync("script", ["--version"], { stdio: "ignore" }).status === 0;
    if (!hasScript) throw new Error("this test needs `script` (util-linux) to give the CLI a terminal");
    // The piped run waits out its 2 s alongside the terminal one (its few lines wait in the pipe).
    const pipedRun = runCli(["send", "main", "hi", "--wait", "2", "--config", d.file], d.env);
    const cmd = `"${process.execPath}" "${CLI}" send main hi --wait 2 --config "${d.file}"`;
    const tty = spawnSync("script", ["-qec", cmd, "/dev/null"], { env: d.env, encoding: "utf8", timeout: 30_000 });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the spinner erases its line with ESC [K
    expect(tty.stdout).toMatch(/\r\x1b\[K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting up to 2 s for the reply to run [0-9a-f-]+…/);
    // The final message follows an erased line: nothing of the spinner is left on it.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the spinner erases its line with ESC [K
    expect(tty.stdout).toMatch(/\r\x1b\[Krun [0-9a-f-]+: timeout: no worker is consuming the runs queue/);
    const piped = await pipedRun;
    expect(piped.stderr, show(piped)).not.toContain("\x1b[");
    expect(piped.stderr).toMatch(/^queued run ([0-9a-f-]+)\nrun \1: timeout: /);
  }, 30_000);
});

it("a killed process's record expires by itself; doctor --alive then fails", async () => {
  // A short TTL (the default is 15 s) so the wait is short: the expiry is the same mechanism.
  const ttlMs = 3000;
  const d = deployment({ deployment: { registryTtlMs: ttlMs } });
  const w = await spawn(["worker", "--config", d.file], d);
  const pid = w.child.pid!;
  expect((await runCli(["doctor", "--alive", "worker", "--config", d.file], d.env)).code).toBe(0);
  await w.kill9();
  expect((await listProcesses(admin)).map((p) => p.pid)).toContain(pid);
  const killedAt = Date.now();
  await settle(async () => !(await listProcesses(admin)).some((p) => p.pid === pid), {
    what: "the killed worker's registry record expiring",
    timeoutMs: ttlMs + 5000,
    stepMs: 100,
  });
  // Not removed at once: it lived out the TTL after its last heartbeat, which was at most one
  // beat before the kill.
  expect(Date.now() - killedAt).toBeGreaterThan(ttlMs - heartbeatEveryMs({ ttlMs }) - 1000);
  const r = await runCli(["doctor", "--alive", "worker", "--config", d.file], d.env);
  expect(r.code, show(r)).toBe(1);
  expect(r.stdout).toMatch(
    new RegExp(`^FAIL {2}alive {2}no switchboard worker process of prefix "${d.prefix}" registered from host \\S+`),
  );
}, 40_000);
