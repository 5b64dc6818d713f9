/**
 * The CLI when things go wrong, as real processes on a private redis-server:
 * - `send --wait` prints the runId once the message is accepted; a gateway killed (or stopped)
 *   mid-wait does not turn an accepted message into an error that invites a resend: the wait is
 *   asked again (another gateway, or Redis directly) until its deadline, and when it still fails,
 *   or on Ctrl-C, the runId, the cause and how to wait are printed with their own exit code;
 * - `--json` answers errors as JSON on stdout; usage errors exit 64;
 * - `deadletters replay --all` names the letters it could not replay.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { tempDir, uniquePrefix } from "../helpers/context.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { CLI, ROOT, spawnSwitchboard, type ChildHandle } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

const redis: PrivateRedis = await startPrivateRedis();
const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
const dirs: { cleanup: () => void }[] = [];
const children: ChildHandle[] = [];
const clis: ChildProcess[] = [];

afterAll(async () => {
  for (const c of clis) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await Promise.allSettled(children.map((c) => c.kill9()));
  admin.disconnect();
  await redis.cleanup();
  for (const d of dirs) d.cleanup();
}, 30_000);

interface Deployment {
  file: string;
  prefix: string;
  env: NodeJS.ProcessEnv;
  gatewayUrl: string;
  keys: RedisKeys;
}

/** A deployment on the private Redis, its gateway on a fixed port (where the CLI looks for one). */
async function deployment(extra: ConfigInput = {}): Promise<Deployment> {
  const d = tempDir("sb-waits");
  dirs.push(d);
  const prefix = uniquePrefix("waits");
  const port = await freePort();
  const input: ConfigInput = {
    redis: { url: redis.url, prefix },
    storage: { dir: join(d.dir, "state") },
    gateway: { host: "127.0.0.1", port },
    ...extra,
  };
  const file = join(d.dir, "switchboard.json5");
  writeFileSync(file, JSON.stringify(input, null, 2));
  return {
    file,
    prefix,
    env: cliEnv({ HOME: d.dir }),
    gatewayUrl: `http://127.0.0.1:${port}`,
    keys: new RedisKeys(prefix),
  };
}

async function start(role: "gateway" | "worker", d: Deployment): Promise<ChildHandle> {
  const child = await spawnSwitchboard([role, "--config", d.file], d.env as Record<string, string>);
  children.push(child);
  return child;
}

interface LiveCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

/** `switchboard <args>` as a child whose output can be read while it runs. */
function startCli(args: string[], env: NodeJS.ProcessEnv): LiveCli {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  clis.push(child);
  let out = "";
  let err = "";
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (err += b));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** The runId the CLI printed on stderr once the message was accepted. */
async function queuedRun(cli: LiveCli): Promise<string> {
  const m = await settle(() => /^queued run ([0-9a-f-]{36})\n/m.exec(cli.stderr()), {
    what: `"queued run <id>" on stderr (so far: ${JSON.stringify(cli.stderr())})`,
  });
  return m[1]!;
}

/** The runIds with a run record: what the gateway accepted. */
async function runIds(d: Deployment): Promise<string[]> {
  const prefix = d.keys.run("");
  return (await admin.keys(`${d.keys.run("*")}`)).map((k) => k.slice(prefix.length));
}

describe("send --wait when the gateway goes away mid-wait", () => {
  it("killed (-9) or stopped (SIGTERM): the runId is printed at once, the reply still comes, sent once", async () => {
    const d = await deployment();
    for (const how of ["kill -9", "SIGTERM"] as const) {
      const gw = await start("gateway", d);
      // No worker yet: the run waits for one, so the gateway dies while the CLI waits.
      const cli = startCli(["send", "main", `hello after ${how}`, "--wait", "40", "--config", d.file], d.env);
      const runId = await queuedRun(cli);
      if (how === "kill -9") await gw.kill9();
      else await gw.stop();
      const worker = await start("worker", d);
      const code = await cli.exited;
      expect(code, `${how}\nstdout: ${cli.stdout()}\nstderr: ${cli.stderr()}`).toBe(0);
      expect(cli.stdout()).toBe(`echo: hello after ${how}\n`);
      expect(cli.stderr()).toBe(`queued run ${runId}\n`);
      await worker.stop();
    }
    // Each message queued once: two runs, two user lines in the transcript.
    expect(await runIds(d)).toHaveLength(2);
    const history = await runCli(["history", "main", "--json", "--config", d.file], d.env);
    const messages = (JSON.parse(history.stdout) as { messages: { role: string }[] }).messages;
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  }, 90_000);

  it("--url of a gateway killed mid-wait, --json: exit 3, the JSON carries the runId and the cause", async () => {
    const d = await deployment();
    const gw = await start("gateway", d);
    const cli = startCli(
      ["send", "main", "never answered", "--wait", "3", "--json", "--url", d.gatewayUrl, "--config", d.file],
      d.env,
    );
    // Killed once the CLI has the accept's answer (a kill between the push and that answer leaves
    // the CLI without a runId: exit 1, gateway_unreachable, rightly).
    const runId = await settle(async () => /^queued run (\S+)$/m.exec(cli.stderr())?.[1], {
      what: "the CLI told the message is queued",
    });
    await gw.kill9();
    const code = await cli.exited;
    expect(code, `stdout: ${cli.stdout()}\nstderr: ${cli.stderr()}`).toBe(3);
    expect(JSON.parse(cli.stdout())).toMatchObject({
      ok: false,
      runId,
      sessionKey: "agent:main:main",
      status: "unknown",
      error: { code: "gateway_unreachable", message: expect.stringContaining(`the wait for run ${runId} failed`) },
    });
    expect(cli.stderr()).toContain(
      `run ${runId} was queued and goes on; its outcome is unknown here, do not send it again`,
    );
    expect(cli.stderr()).toContain(`switchboard call agent.wait --params '{"runId":"${runId}"`);
    expect(await runIds(d)).toEqual([runId]);
  }, 60_000);

  it("Ctrl-C during the wait: exit 130 with the runId and how to wait for it (text and --json)", async () => {
    const d = await deployment();
    const gw = await start("gateway", d);
    const text = startCli(["send", "main", "interrupted", "--wait", "30", "--config", d.file], d.env);
    const runId = await queuedRun(text);
    text.child.kill("SIGINT");
    expect(await text.exited, text.stderr()).toBe(130);
    expect(text.stderr()).toContain(`interrupted (SIGINT) while waiting: run ${runId} is queued and goes on`);
    expect(text.stderr()).toContain(`switchboard call agent.wait --params '{"runId":"${runId}"`);

    const json = startCli(["send", "main", "interrupted too", "--wait", "30", "--json", "--config", d.file], d.env);
    const second = await settle(async () => (await runIds(d)).find((id) => id !== runId), {
      what: "the second message accepted",
    });
    json.child.kill("SIGINT");
    expect(await json.exited, json.stderr()).toBe(130);
    expect(JSON.parse(json.stdout())).toMatchObject({
      ok: false,
      runId: second,
      status: "interrupted",
      error: { code: "interrupted" },
    });
    await gw.stop();
  }, 60_000);
});

describe("--json errors and exit codes", () => {
  it("Redis down: sessions, deadletters, history, send print {ok:false,error} on stdout, exit 1", async () => {
    const closed = await freePort();
    const d = await deployment({ redis: { url: `redis://127.0.0.1:${closed}`, prefix: "down" } });
    for (const args of [["sessions"], ["deadletters"], ["history", "main"], ["send", "main", "hi"]]) {
      const r = await runCli([...args, "--json", "--config", d.file], d.env);
      expect(r.code, show(r)).toBe(1);
      expect(JSON.parse(r.stdout), args.join(" ")).toEqual({
        ok: false,
        error: { code: "redis_unavailable", message: expect.stringContaining("Redis does not answer") },
      });
      expect(r.stderr, args.join(" ")).toMatch(/^error \[redis_unavailable\]: /);
    }
  }, 60_000);

  it("deadletters replay of a runId that is not a dead letter: not_found as JSON, exit 1", async () => {
    const d = await deployment();
    const r = await runCli(["deadletters", "replay", "no-such-run", "--json", "--config", d.file], d.env);
    expect(r.code, show(r)).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      ok: false,
      error: { code: "not_found", message: "No dead letter for run no-such-run" },
    });
  });

  it("usage errors exit 64, before anything is asked; with --json as JSON too", async () => {
    // A Redis nobody listens on: a usage error must not get as far as asking it.
    const d = await deployment({ redis: { url: `redis://127.0.0.1:${await freePort()}`, prefix: "usage" } });
    for (const [args, message] of [
      [["sessions", "--limit", "0"], '--limit must be a whole number ≥ 1 (got "0")'],
      [["sessions", "--limit", "5", "--all"], "--limit and --all exclude each other"],
      [["sessions", "--nope"], "unknown option '--nope'"],
      [["deadletters", "frob"], "unknown action frob (list, replay, discard)"],
      [["deadletters", "discard"], "discard needs a runId"],
      [["history", "main", "--limit", "x"], '--limit must be a whole number ≥ 1 (got "x")'],
      [["send", "main", "never sent", "--wait", "601"], "--wait must be a number of seconds from 0 to 600 (got 601)"],
      [["send", "main"], "missing required argument 'message'"],
      // Not 1 (unhealthy): a mistyped role in a health check must not read as a dead process.
      [["doctor", "--alive", "bogus"], '--alive must be one of worker, gateway, start, any (got "bogus")'],
    ] as const) {
      const r = await runCli([...args, "--json", "--config", d.file], d.env);
      expect(r.code, show(r)).toBe(64);
      expect(JSON.parse(r.stdout), args.join(" ")).toEqual({ ok: false, error: { code: "invalid_request", message } });
      const plain = await runCli([...args, "--config", d.file], d.env);
      expect(plain.code, show(plain)).toBe(64);
      expect(plain.stdout).toBe("");
      expect(plain.stderr).toContain(message);
    }
    // mcp has no --json: its bad flag values exit 64 too, before Redis is asked.
    for (const [args, message] of [
      [["--http", "99999"], '--http must be a port number 0-65535 (got "99999")'],
      [["--http", "0", "--host", "0.0.0.0"], "--host 0.0.0.0 is not loopback: set gateway.auth.token"],
      [["--token", "short"], "--token: use at least 8 characters"],
    ] as const) {
      const r = await runCli(["mcp", "--session", "main", ...args, "--config", d.file], d.env);
      expect(r.code, show(r)).toBe(64);
      expect(r.stderr).toContain(`error [invalid_request]: ${message}`);
    }
  }, 90_000);
});

describe("deadletters replay --all", () => {
  it("names the letters it cannot replay and how to discard them; exit 2 until they are gone", async () => {
    const d = await deployment();
    const t0 = Date.now() - 3_600_000;
    const m = admin.multi();
    for (let i = 0; i < 3; i++) {
      const runId = `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
      const sessionKey = `agent:main:telegram:dm:${900000 + i}`;
      const letter = {
        runId,
        sessionKey,
        reason: "storage unavailable past its deadline",
        kind: "storage",
        failedAt: t0 + i,
        replays: 0,
        turn: {
          runId,
          sessionKey,
          agentId: "main",
          sessionId: `dl-${i}`,
          text: `lost message ${i}`,
          step: "turn",
          provenance: "user",
          messageTs: t0 + i,
          enqueuedAt: t0 + i,
        },
      };
      m.hset(d.keys.deadLetters(), runId, JSON.stringify(letter)).zadd(d.keys.deadLetterIndex(), t0 + i, runId);
    }
    const bad = {
      runId: "corrupt-1",
      sessionKey: "agent:main:main",
      reason: "unreadable turn data",
      kind: "corrupt",
      failedAt: t0 - 1,
      replays: 0,
      raw: "\u0000garbage",
    };
    m.hset(d.keys.deadLetters(), bad.runId, JSON.stringify(bad)).zadd(
      d.keys.deadLetterIndex(),
      bad.failedAt,
      bad.runId,
    );
    // A sub-agent's letter whose session was deleted: it cannot be made again (its spawn wrote its
    // depth and role), so the replay leaves it, names it, and goes on with the others.
    const orphanKey = "agent:main:subagent:deleted-child";
    const orphan = {
      runId: "00000000-0000-4000-8000-00000000000f",
      sessionKey: orphanKey,
      reason: "storage unavailable past its deadline",
      kind: "storage",
      failedAt: t0 - 2,
      replays: 0,
      turn: {
        runId: "00000000-0000-4000-8000-00000000000f",
        sessionKey: orphanKey,
        agentId: "main",
        sessionId: "dl-orphan",
        text: "task of a child cleaned up",
        step: "turn",
        provenance: "inter_session",
        messageTs: t0 - 2,
        enqueuedAt: t0 - 2,
      },
    };
    m.hset(d.keys.deadLetters(), orphan.runId, JSON.stringify(orphan)).zadd(
      d.keys.deadLetterIndex(),
      orphan.failedAt,
      orphan.runId,
    );
    await m.exec();

    const r = await runCli(["deadletters", "replay", "--all", "--config", d.file], d.env);
    expect(r.code, show(r)).toBe(2);
    expect(r.stdout).toContain("3 replayed\n");
    const gone = `Session ${orphanKey} was deleted before its turn was queued`;
    expect(r.stdout).toContain(
      "2 not replayable (no readable turn, or a session that cannot be made again):\n" +
        "  corrupt-1  corrupt  agent:main:main: unreadable turn data\n" +
        `  ${orphan.runId}  refused  ${orphanKey}: ${gone}\n` +
        "discard with: switchboard deadletters discard <runId>\n",
    );

    const json = await runCli(["deadletters", "replay", "--all", "--json", "--config", d.file], d.env);
    expect(json.code, show(json)).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({
      count: 0,
      replayed: [],
      notReplayable: [
        { runId: "corrupt-1", kind: "corrupt", sessionKey: "agent:main:main", reason: "unreadable turn data" },
        { runId: orphan.runId, sessionKey: orphanKey, reason: gone },
      ],
    });

    for (const id of ["corrupt-1", orphan.runId])
      expect((await runCli(["deadletters", "discard", id, "--config", d.file], d.env)).code).toBe(0);
    const clean = await runCli(["deadletters", "replay", "--all", "--config", d.file], d.env);
    expect(clean.code, show(clean)).toBe(0);
    expect(clean.stdout).toBe("0 replayed\n");
  }, 60_000);
});
