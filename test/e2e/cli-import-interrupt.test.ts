/**
 * `switchboard import openclaw` as a real process stopped part-way: by Ctrl-C on a terminal
 * (a real pty, via `script`), by SIGINT/SIGTERM with output piped, and by its Redis going away.
 * Each time it gives the terminal back, leaves no database copy in $TMPDIR, exits with the code
 * that says why, and says that running it again resumes; the run after it completes the import.
 * Copies left by an import killed outright (-9) are removed by the next one.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import sqlite from "node-sqlite3-wasm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { tempDir, uniquePrefix } from "../helpers/context.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { CLI, ROOT } from "../helpers/system.js";

const SESSIONS = 40;
const LINES = 2000;

const cleanups: (() => void)[] = [];
const redises: PrivateRedis[] = [];
let stateDir: string;

afterAll(async () => {
  for (const r of redises) await r.cleanup();
  for (const c of cleanups) c();
}, 30_000);

function dir(tag: string): string {
  const d = tempDir(tag);
  cleanups.push(d.cleanup);
  return d.dir;
}

/** An OpenClaw SQLite store big enough that importing it takes seconds (its copy is made in $TMPDIR). */
function bigSqliteState(): string {
  const state = dir("oc-big");
  mkdirSync(join(state, "agents", "main", "agent"), { recursive: true });
  const db = new sqlite.Database(join(state, "agents", "main", "agent", "openclaw-agent.sqlite"));
  try {
    db.exec(`CREATE TABLE session_nodes (session_key TEXT NOT NULL PRIMARY KEY, current_session_id TEXT NOT NULL,
      entry_json TEXT NOT NULL, updated_at INTEGER NOT NULL);
      CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT NOT NULL,
      created_at INTEGER NOT NULL, PRIMARY KEY (session_id, seq)); BEGIN;`);
    const node = db.prepare("INSERT INTO session_nodes VALUES (?, ?, ?, ?)");
    const event = db.prepare("INSERT INTO transcript_events VALUES (?, ?, ?, ?)");
    for (let s = 0; s < SESSIONS; s++) {
      const sid = `q${s}`;
      node.run([
        `agent:main:slack:dm:u${s}`,
        sid,
        JSON.stringify({ sessionId: sid, updatedAt: 1_767_225_600_000 + s }),
        1,
      ]);
      for (let i = 0; i < LINES; i++)
        event.run([
          sid,
          i + 1,
          JSON.stringify({
            type: "message",
            id: `${sid}-${i}`,
            timestamp: "2026-01-01T00:00:00Z",
            message: { role: "user", content: `line ${i} `.repeat(20) },
          }),
          1,
        ]);
    }
    node.finalize();
    event.finalize();
    db.exec("COMMIT");
  } finally {
    db.close();
  }
  return state;
}

interface Deployment {
  file: string;
  env: NodeJS.ProcessEnv;
  tmp: string;
  /** Where the imported transcripts go. */
  transcripts: string;
}

function deployment(redisUrl: string): Deployment {
  const d = dir("sb-imp");
  const tmp = join(d, "tmp");
  mkdirSync(tmp);
  const file = join(d, "switchboard.json5");
  writeFileSync(
    file,
    JSON.stringify({ redis: { url: redisUrl, prefix: uniquePrefix("imp") }, storage: { dir: join(d, "state") } }),
  );
  return {
    file,
    tmp,
    transcripts: join(d, "state", "agents", "main", "sessions"),
    env: cliEnv({ HOME: d, SWITCHBOARD_STATE_DIR: join(d, "state"), TMPDIR: tmp }),
  };
}

interface Running {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

function start(cmd: string, args: string[], env: NodeJS.ProcessEnv): Running {
  const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, out: () => out, exited };
}

async function until(what: string, check: () => boolean, r: Running, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (r.child.exitCode !== null || Date.now() > end) throw new Error(`no ${what}; output so far:\n${r.out()}`);
    await new Promise((res) => setTimeout(res, 10));
  }
}

const copies = (d: Deployment) => readdirSync(d.tmp).filter((n) => n.startsWith("switchboard-import-"));
/**
 * Part-way through the import, whatever the machine's speed: with 8 sessions written at once, a
 * ninth transcript file means one session is complete, and 31 are still to come.
 */
const partWay = (d: Deployment) => () => existsSync(d.transcripts) && readdirSync(d.transcripts).length >= 9;
const RESUMES = "Running the same `switchboard import openclaw` again resumes it";

/** The import, piped, as a script or a service would run it. */
const importing = (d: Deployment): Running =>
  start(process.execPath, [CLI, "--config", d.file, "import", "openclaw", stateDir], d.env);

let redis: PrivateRedis;

beforeAll(async () => {
  redis = await startPrivateRedis();
  redises.push(redis);
  stateDir = bigSqliteState();
}, 60_000);

describe("import openclaw interrupted", () => {
  it("SIGINT (output piped): no database copy left, 130, and the next run completes the import", async () => {
    const d = deployment(redis.url);
    // A copy an import killed with -9 left behind, and one of a live import: only the first goes.
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
    const live = `switchboard-import-p${process.pid}-yyyyyy`;
    for (const pid of [Number(dead), process.pid]) {
      const name = `switchboard-import-p${pid}-${pid === process.pid ? "yyyyyy" : "zzzzzz"}`;
      mkdirSync(join(d.tmp, name));
      writeFileSync(join(d.tmp, name, "owner.json"), JSON.stringify({ pid, host: hostname() }));
      writeFileSync(join(d.tmp, name, "openclaw-agent.sqlite"), "x".repeat(10_000));
    }

    const r = importing(d);
    // Its own copy, named after it; the dead import's copy is gone already.
    await until("a part-way import", partWay(d), r, 60_000);
    expect(copies(d).filter((n) => n !== live)).toEqual([
      expect.stringMatching(new RegExp(`^switchboard-import-p${r.child.pid}-`)),
    ]);
    r.child.kill("SIGINT");
    expect(await r.exited, r.out()).toBe(130);
    expect(r.out()).toContain(`import interrupted (SIGINT). ${RESUMES}`);
    expect(copies(d), r.out()).toEqual([live]);

    const done = await runCli(
      ["--config", d.file, "import", "openclaw", stateDir, "--json", "--no-progress"],
      d.env,
      120_000,
    );
    expect(done.code, show(done)).toBe(0);
    const report = JSON.parse(done.stdout) as {
      sessions: { created: number; unchanged: number };
      transcripts: { linesWritten: number; linesPresent: number };
    };
    // Resumed: what the interrupted runs wrote is there, the rest was written now, nothing twice.
    expect(report.sessions.created + report.sessions.unchanged).toBe(SESSIONS);
    expect(report.sessions.unchanged).toBeGreaterThan(0);
    expect(report.transcripts.linesPresent).toBeGreaterThan(0);
    expect(report.transcripts.linesWritten + report.transcripts.linesPresent).toBe(SESSIONS * LINES);
    expect(copies(d)).toEqual([live]);
  }, 180_000);

  it("SIGTERM (a service manager stopping it): 143, no database copy left", async () => {
    const d = deployment(redis.url);
    const r = importing(d);
    await until("a part-way import", partWay(d), r, 60_000);
    r.child.kill("SIGTERM");
    expect(await r.exited, r.out()).toBe(143);
    expect(r.out()).toContain(`import interrupted (SIGTERM). ${RESUMES}`);
    expect(copies(d)).toEqual([]);
  }, 120_000);

  it("Ctrl-C on a terminal: the bar gives back the cursor and line wrap", async () => {
    const d = deployment(redis.url);
    const r = start(
      "script",
      [
        "-q",
        "-e",
        "-c",
        `exec '${process.execPath}' '${CLI}' --config '${d.file}' import openclaw '${stateDir}'`,
        "/dev/null",
      ],
      d.env,
    );
    await until("a part-way import", partWay(d), r, 60_000);
    expect(r.out()).toMatch(/import \[.*\] \d+% \| \d+\/40 sessions \| \d+ transcript lines/);
    // What a terminal sends for Ctrl-C: the pty turns it into SIGINT for the import.
    r.child.stdin!.write("\x03");
    expect(await r.exited, r.out()).toBe(130);
    const out = r.out();
    expect(out.lastIndexOf("\x1b[?25l")).toBeGreaterThan(-1);
    expect(out.lastIndexOf("\x1b[?25h")).toBeGreaterThan(out.lastIndexOf("\x1b[?25l"));
    expect(out.lastIndexOf("\x1b[?7h")).toBeGreaterThan(out.lastIndexOf("\x1b[?7l"));
    expect(out).toContain(`import interrupted (SIGINT). ${RESUMES}`);
    expect(copies(d)).toEqual([]);
  }, 120_000);

  it("Redis gone part-way: redis_unavailable, saying a re-run resumes; no copy left; a re-run completes", async () => {
    const own = await startPrivateRedis();
    redises.push(own);
    const d = deployment(own.url);
    const r = importing(d);
    await until("a part-way import", partWay(d), r, 60_000);
    await own.stop();
    expect(await r.exited, r.out()).toBe(1);
    const lines = r.out().split("\n").filter(Boolean);
    // Progress lines, then the one error line: no log lines, no bare ioredis message.
    expect(
      lines.filter((l) => !l.startsWith("import: ")),
      r.out(),
    ).toEqual([
      expect.stringMatching(
        new RegExp(
          String.raw`^error \[redis_unavailable\]: Redis does not answer at redis://127\.0\.0\.1:${own.port} ` +
            String.raw`\(.+\)\. ` +
            String.raw`Start Redis .* The import stopped part-way\. ${RESUMES}`,
        ),
      ),
    ]);
    expect(copies(d)).toEqual([]);

    // Redis back (empty: nothing was persisted), and the import runs to the end.
    await own.start();
    const done = await runCli(
      ["--config", d.file, "import", "openclaw", stateDir, "--json", "--no-progress"],
      d.env,
      120_000,
    );
    expect(done.code, show(done)).toBe(0);
    expect(JSON.parse(done.stdout).sessions.found).toBe(SESSIONS);
  }, 180_000);
});
