/**
 * The embedded default of `switchboard start`: when no Redis answers at the configured URL and
 * none was configured explicitly, start a private `redis-server` from PATH on a free port, with
 * AOF and its data under the state dir, so a newcomer needs nothing but Node and redis-server.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { probeConnection } from "../queues/redis-connections.js";

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
  url: string;
  dataDir: string;
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
}

const RECORD_FILE = "embedded.json";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Alive and a redis-server (where /proc tells; a reused pid is not ours to adopt or kill). */
function aliveRedis(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("redis-server");
  } catch {
    return true;
  }
}

function readRecord(dataDir: string): EmbeddedRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dataDir, RECORD_FILE), "utf8")) as EmbeddedRecord;
    return Number.isInteger(r.redisPid) && Number.isInteger(r.port) && Number.isInteger(r.ownerPid) ? r : undefined;
  } catch {
    return undefined;
  }
}

function writeRecord(dataDir: string, r: EmbeddedRecord): void {
  writeFileSync(join(dataDir, RECORD_FILE), `${JSON.stringify(r)}\n`, { mode: 0o600 });
}

async function terminate(pid: number, timeoutMs = 5000): Promise<void> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) && Date.now() < deadline) await sleep(50);
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

export async function startEmbeddedRedis(stateDir: string): Promise<EmbeddedRedis> {
  const dataDir = join(stateDir, "redis");
  mkdirSync(dataDir, { recursive: true });
  const previous = readRecord(dataDir);
  if (previous && previous.ownerPid !== process.pid && alive(previous.ownerPid) && aliveRedis(previous.redisPid)) {
    throw new Error(
      `another switchboard start (pid ${previous.ownerPid}) serves the embedded Redis of ${stateDir}; stop it, ` +
        "or use another SWITCHBOARD_STATE_DIR",
    );
  }
  if (previous && aliveRedis(previous.redisPid)) {
    // Left behind by an owner that was killed: adopt it if it answers, else make way for a new one.
    const url = `redis://127.0.0.1:${previous.port}`;
    if (await answersWithin(url, ANSWER_TIMEOUT_MS)) {
      writeRecord(dataDir, { ...previous, ownerPid: process.pid });
      return owned(url, dataDir, previous.redisPid);
    }
    await terminate(previous.redisPid);
  }
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess;
  try {
    child = spawn(
      "redis-server",
      [
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
      { stdio: "ignore" },
    );
  } catch (err) {
    throw new Error(
      `cannot start redis-server (${(err as Error).message}); install it (apt-get install -y redis-server) ` +
        `or set REDIS_URL`,
    );
  }
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
    throw new Error(`embedded redis-server did not answer on ${url}`);
  }
  writeRecord(dataDir, { redisPid: child.pid ?? -1, port, ownerPid: process.pid });
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
