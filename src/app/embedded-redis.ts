/**
 * The embedded default of `switchboard start`: when no Redis answers at the configured URL and
 * none was configured explicitly, start a private `redis-server` from PATH on a free port, with
 * AOF and its data under the state dir, so a newcomer needs nothing but Node and redis-server.
 *
 * Private to the user who runs it: a loopback port is open to every local user, so the server
 * asks for a random password (`requirepass`, new for each server started), known only from
 * `<dataDir>/embedded.json` and the runtime file (both 0600), never from its command line (it
 * is given on stdin). Its data dir is 0700 and it runs with umask 077, so its AOF is 0600.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { probeConnection } from "../queues/redis-connections.js";
import { withStartLock } from "./start-lock.js";
import { processAlive } from "./process-alive.js";

/**
 * Why no Redis (or, for a cluster URL, no ready Redis Cluster) answers one PING at `url` within
 * `timeoutMs`, or undefined when one does. A server that takes the connection and never replies
 * counts as not answering (queues/redis-connections.ts, `probeConnection`).
 */
export async function redisProblem(url: string, timeoutMs = 1500): Promise<string | undefined> {
  const probe = await probeConnection(url, timeoutMs);
  probe.redis?.disconnect();
  return probe.error;
}

/** One PING, no retries, within `timeoutMs`: true when Redis answers. */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  return (await redisProblem(url, timeoutMs)) === undefined;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === "object" && a ? a.port : 0));
    });
  });
}

export interface EmbeddedRedis {
  /** With its password: owner-only places (the runtime file) and connections only; show `displayRedisUrl`. */
  url: string;
  dataDir: string;
  /** Something the operator should know about how it was taken over (printed once by `start`). */
  notice?: string;
  stop(): Promise<void>;
}

/**
 * Who serves a state dir's embedded Redis: its redis-server and the `switchboard start` that
 * owns it, in `<dataDir>/embedded.json`. A second start on the same state dir while the owner
 * lives is refused (two servers on one AOF would corrupt it); a redis-server left behind by an
 * owner killed with SIGKILL is adopted by the next start instead of running a second one.
 */
interface EmbeddedRecord {
  redisPid: number;
  port: number;
  ownerPid: number;
  /** Its `requirepass`; absent in a record written by a version before passwords. */
  password?: string;
}

const RECORD_FILE = "embedded.json";

/** Alive and a redis-server (where /proc tells; a reused pid is not ours to adopt or kill). */
function aliveRedis(pid: number): boolean {
  if (!processAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("redis-server");
  } catch {
    return true;
  }
}

function readRecord(dataDir: string): EmbeddedRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dataDir, RECORD_FILE), "utf8")) as EmbeddedRecord;
    const valid =
      Number.isInteger(r.redisPid) &&
      Number.isInteger(r.port) &&
      Number.isInteger(r.ownerPid) &&
      (r.password === undefined || (typeof r.password === "string" && /^[0-9a-f]{32,}$/.test(r.password)));
    return valid ? r : undefined;
  } catch {
    return undefined;
  }
}

function writeRecord(dataDir: string, r: EmbeddedRecord): void {
  const file = join(dataDir, RECORD_FILE);
  writeFileSync(file, `${JSON.stringify(r)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600); // a file that was already there keeps its mode otherwise
}

/** Hex: nothing in it needs escaping in a URL or in redis.conf. */
function newPassword(): string {
  return randomBytes(24).toString("hex");
}

function embeddedUrl(port: number, password: string | undefined): string {
  return password ? `redis://:${password}@127.0.0.1:${port}` : `redis://127.0.0.1:${port}`;
}

/**
 * The data dir 0700 and what is in it owner-only (0700 dirs, 0600 files): an earlier version made
 * them 0755 and 0644, readable by every local user, and a server it started still writes so.
 */
function makePrivate(dataDir: string): void {
  chmodSync(dataDir, 0o700); // this one must succeed: with it private, all under it is
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isFile() && !entry.isDirectory()) continue; // chmod would follow a symlink out
      const path = join(dir, entry.name);
      try {
        chmodSync(path, entry.isDirectory() ? 0o700 : 0o600);
        if (entry.isDirectory()) walk(path);
      } catch {
        // Not ours to change (or gone meanwhile): the data dir's own mode keeps others out.
      }
    }
  };
  walk(dataDir);
}

/**
 * A redis-server started without a password (by a version before them) made to ask for one:
 * `CONFIG SET requirepass`, then every other connection dropped, so none opened before keeps
 * its access. True when it then answers with the password only.
 */
async function requirePassword(port: number, password: string): Promise<boolean> {
  const probe = await probeConnection(embeddedUrl(port, undefined), 1500);
  if (!probe.redis) return false;
  try {
    await probe.redis.call("CONFIG", "SET", "requirepass", password);
    for (const type of ["normal", "pubsub"]) await probe.redis.call("CLIENT", "KILL", "TYPE", type, "SKIPME", "yes");
  } catch {
    return false;
  } finally {
    probe.redis.disconnect();
  }
  return (await redisAnswers(embeddedUrl(port, password))) && !(await redisAnswers(embeddedUrl(port, undefined)));
}

async function terminate(pid: number, timeoutMs = 5000): Promise<void> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid) && Date.now() < deadline) await sleep(50);
}

async function answersWithin(url: string, ms: number, failed?: Promise<never>): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = failed ? await Promise.race([redisAnswers(url, 500), failed]) : await redisAnswers(url, 500);
    if (ok) return true;
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

/** How long a redis-server may take to answer (loading a large AOF takes a while). */
const ANSWER_TIMEOUT_MS = 10_000;

/** How long a start waits for another one deciding on the same data dir (it may load a large AOF). */
const LOCK_WAIT_MS = 3 * ANSWER_TIMEOUT_MS;

export async function startEmbeddedRedis(stateDir: string): Promise<EmbeddedRedis> {
  const dataDir = join(stateDir, "redis");
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  makePrivate(dataDir);
  return await withStartLock(dataDir, `the embedded Redis of ${stateDir}`, LOCK_WAIT_MS, () =>
    startOrAdopt(stateDir, dataDir),
  );
}

async function startOrAdopt(stateDir: string, dataDir: string): Promise<EmbeddedRedis> {
  const previous = readRecord(dataDir);
  if (
    previous &&
    previous.ownerPid !== process.pid &&
    processAlive(previous.ownerPid) &&
    aliveRedis(previous.redisPid)
  ) {
    throw new Error(
      `another switchboard start (pid ${previous.ownerPid}) serves the embedded Redis of ${stateDir}; stop it, ` +
        "or use another SWITCHBOARD_STATE_DIR",
    );
  }
  if (previous && aliveRedis(previous.redisPid)) {
    // Left behind by an owner that was killed: adopt it if it answers, else make way for a new one.
    const url = embeddedUrl(previous.port, previous.password);
    if (await answersWithin(url, ANSWER_TIMEOUT_MS)) {
      if (previous.password) {
        writeRecord(dataDir, { ...previous, ownerPid: process.pid });
        return owned(url, dataDir, previous.redisPid);
      }
      // Started by a version before passwords: it keeps its data and gets one now, without a
      // restart (which would wait for a large AOF to load). Failing that, it is replaced below.
      const password = newPassword();
      if (await requirePassword(previous.port, password)) {
        writeRecord(dataDir, { ...previous, ownerPid: process.pid, password });
        return {
          ...owned(embeddedUrl(previous.port, password), dataDir, previous.redisPid),
          notice:
            `adopted the embedded redis-server (pid ${previous.redisPid}) an earlier version left running ` +
            "without a password: it asks for one now, and every connection it had was closed",
        };
      }
    }
    await terminate(previous.redisPid);
  }
  const port = await freePort();
  const password = newPassword();
  const url = embeddedUrl(port, password);
  let child: ChildProcess;
  // Owner-only files (AOF, its manifest): the umask is inherited at spawn, and restored at once.
  let umask: number | undefined;
  try {
    umask = process.umask(0o077);
  } catch {
    // Not settable here (a worker thread): the 0700 data dir still keeps other users out.
  }
  try {
    child = spawn(
      "redis-server",
      [
        // The config on stdin first: a password on the command line would show in `ps`.
        "-",
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dataDir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction",
      ],
      // Its own process group: Ctrl-C signals the terminal's whole foreground group, and Redis must
      // outlive the graceful shutdown that follows (running turns need it), then stop() ends it.
      // Not unref'd: this process still waits for it, as before.
      { stdio: ["pipe", "ignore", "ignore"], detached: true },
    );
  } catch (err) {
    throw new Error(
      `cannot start redis-server (${(err as Error).message}); install it (apt-get install -y redis-server) ` +
        `or set REDIS_URL`,
    );
  } finally {
    if (umask !== undefined) process.umask(umask);
  }
  child.stdin!.on("error", () => {}); // it exited before reading: said by its exit below
  child.stdin!.end(`requirepass ${password}\n`);
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(
        new Error(
          `cannot start redis-server: ${err.message}; install it (apt-get install -y redis-server) or set REDIS_URL`,
        ),
      ),
    );
    child.once("exit", (code) => reject(new Error(`redis-server exited with code ${code}`)));
  });
  failed.catch(() => {});
  // Not left running by this process whatever happens to it, short of SIGKILL (then the next
  // start adopts it, see above).
  const killOnExit = () => child.kill("SIGTERM");
  process.once("exit", killOnExit);
  let answered: boolean;
  try {
    answered = await answersWithin(url, ANSWER_TIMEOUT_MS, failed);
  } catch (err) {
    process.off("exit", killOnExit); // it could not start, or exited: nothing to end
    throw err;
  }
  if (!answered) {
    // Not left behind holding the data dir (a start killed here used to keep the CLI alive).
    await terminate(child.pid ?? -1);
    process.off("exit", killOnExit);
    throw new Error(`embedded redis-server did not answer on 127.0.0.1:${port}`);
  }
  writeRecord(dataDir, { redisPid: child.pid ?? -1, port, ownerPid: process.pid, password });
  const handle = owned(url, dataDir, child.pid ?? -1);
  return {
    ...handle,
    async stop() {
      process.off("exit", killOnExit);
      await handle.stop();
    },
  };
}

/** The embedded Redis `pid` serving `url`, owned by this process: stop() ends it and forgets it. */
function owned(url: string, dataDir: string, pid: number): EmbeddedRedis {
  return {
    url,
    dataDir,
    async stop() {
      await terminate(pid);
      rmSync(join(dataDir, RECORD_FILE), { force: true });
    },
  };
}
