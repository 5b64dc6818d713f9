/**
 * `switchboard start | gateway | worker`: long-running processes. SIGINT/SIGTERM close the
 * gateway first (no new work, waits handed over), then the workers (running turns finish within
 * `workers.shutdownGraceMs` or are handed back), then Redis connections; a second signal exits
 * at once (docs/concepts/shutdown.md).
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../config/load.js";
import type { Config } from "../../config/schema.js";
import { startEmbeddedRedis, redisProblem, type EmbeddedRedis } from "../../app/embedded-redis.js";
import { removeRuntimeInfo, runtimeFilePath, writeRuntimeInfo } from "../../app/runtime-file.js";
import { startSystem, type SwitchboardSystem } from "../../app/system.js";
import { createLogger } from "../../app/logger.js";
import { formatBoundAddresses } from "../../gateway/bound-addresses.js";
import { parseQueueList } from "../../queues/queue-names.js";
import type { GlobalOptions } from "../client.js";
import { ConfigError } from "../../errors/index.js";
import { checkTokenFlag, UsageError } from "../flags.js";
import { joinDeployment, sharingSummary, type Registration } from "../../deployment/index.js";
import { redisUnavailable } from "../client.js";
import { displayRedisUrl } from "../../config/redis-url.js";

const log = createLogger("switchboard");

/**
 * SIGINT/SIGTERM handling, installed before anything starts: workers take turns (and pop the
 * ready list) while the gateway is still loading, so a signal then must stop them gracefully, not
 * kill the process with a lease held. While starting, a signal aborts `starting` (the start-up
 * closes what it started and exits 0); once `ready`, it runs `closeAll`; a second one exits at once.
 */
function installSignalHandlers(): { starting: AbortSignal; ready(closeAll: () => Promise<void>): void } {
  const starting = new AbortController();
  let closeAll: (() => Promise<void>) | undefined;
  let closing = false;
  const shutDown = (fn: () => Promise<void>) =>
    fn().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  const handler = (sig: string) => {
    if (closing) {
      log.warn({ signal: sig }, "second signal: exiting now");
      process.exit(1);
    }
    closing = true;
    log.info({ signal: sig }, closeAll ? "shutting down" : "shutting down while starting");
    process.stderr.write(`switchboard: ${sig}: shutting down (send it again to exit at once)\n`);
    if (closeAll) void shutDown(closeAll);
    else starting.abort(new StartAborted(sig));
  };
  process.on("SIGINT", () => handler("SIGINT"));
  process.on("SIGTERM", () => handler("SIGTERM"));
  return {
    starting: starting.signal,
    ready(fn) {
      closeAll = fn;
      // A signal in the last synchronous steps of the start-up: the abort was not seen, close now.
      if (starting.signal.aborted) void shutDown(fn);
    },
  };
}

/** Why a start-up stopped: a signal, which is a clean exit, not a failure. */
class StartAborted extends Error {
  constructor(readonly signal: string) {
    super(`${signal} while starting`);
  }
}

/** A start-up stopped by a signal has closed what it started: exit as a stop does (code 0). */
function exitIfAborted(err: unknown): void {
  if (err instanceof StartAborted) {
    log.info({ signal: err.signal }, "stopped while starting");
    process.exit(0);
  }
}

async function ensureRedis(
  config: Config,
  redisExplicit: boolean,
  allowEmbedded: boolean,
): Promise<EmbeddedRedis | undefined> {
  // Bounded: a Redis that takes the connection and never answers is no Redis here (README, `npm start`).
  const problem = await redisProblem(config.redis.url);
  if (problem === undefined) return undefined;
  if (redisExplicit || !allowEmbedded) throw redisUnavailable(config.redis.url, problem);
  const embedded = await startEmbeddedRedis(config.storage.dir);
  // Its URL (with its password) is in the runtime file, where the CLI of this user finds it.
  process.stderr.write(
    `no Redis at ${displayRedisUrl(config.redis.url)} (${problem}): ` +
      `started an embedded redis-server (data in ${embedded.dataDir}, ` +
      `password in ${runtimeFilePath(config.storage.dir)})\n`,
  );
  if (embedded.notice) process.stderr.write(`warning: ${embedded.notice}\n`);
  config.redis.url = embedded.url;
  return embedded;
}

/**
 * Errors of the state dir that say it is the wrong place (not a directory, not ours, read-only,
 * a bad name): no retry changes them, so the process refuses to start. Any other error (ENOSPC,
 * EDQUOT, EIO, ESTALE, out of descriptors, …) is a storage fault of the moment: a worker refused
 * then would be gone for good after a crash or a deploy during a disk-full incident, while its
 * turns are parked and retried until storage returns (docs/concepts/reliability.md).
 */
const MISCONFIGURED_STATE_DIR = new Set([
  "EACCES",
  "EPERM",
  "EROFS",
  "ENOTDIR",
  "EISDIR",
  "ELOOP",
  "ENAMETOOLONG",
  "EEXIST",
  "ENOENT",
  "EINVAL",
]);

/** A storage fault the state-dir probe met and started through. */
export interface StorageProbeFault {
  code: string;
  message: string;
}

/**
 * Create the state dir and write and remove a file in it. A misconfigured dir throws a
 * ConfigError naming the setting that chose it (`storage.dir`, or SWITCHBOARD_STATE_DIR when that
 * set it); a storage fault (a full disk) is returned, to be warned about.
 */
export function probeStorageDir(dir: string, source: string | undefined): StorageProbeFault | undefined {
  const probe = join(dir, `.probe-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(probe, "switchboard\n");
    rmSync(probe, { force: true });
    return undefined;
  } catch (err) {
    // On a full disk the file is created and its write fails: do not leave it behind.
    try {
      rmSync(probe, { force: true });
    } catch {
      // the dir itself is what failed
    }
    const code = (err as NodeJS.ErrnoException).code;
    const message = `cannot create or write the state dir ${dir}: ${(err as Error).message}`;
    if (code !== undefined && !MISCONFIGURED_STATE_DIR.has(code)) return { code, message };
    const fromEnv = Boolean(process.env.SWITCHBOARD_STATE_DIR);
    throw new ConfigError(
      [
        fromEnv
          ? { path: "SWITCHBOARD_STATE_DIR", message: `${message} (it sets storage.dir)` }
          : { path: "storage.dir", message },
      ],
      source,
    );
  }
}

/**
 * Whether the gateway asks for a token, for its ready line. Without one it only refuses requests
 * not addressed to a loopback name (docs/concepts/config.md#gateway-access): anything on this
 * host, or a proxy forwarding a loopback Host, gets in.
 */
function gatewayAuth(config: Config): string {
  return config.gateway.auth.token
    ? "bearer token required"
    : "none, local-only (no token: anyone on this host can call it; Host/Origin checked)";
}

export async function serveCommand(
  mode: "start" | "gateway" | "worker",
  opts: GlobalOptions & { queues?: string; concurrency?: string; force?: boolean },
): Promise<void> {
  if (
    opts.concurrency !== undefined &&
    !(Number.isInteger(Number(opts.concurrency)) && Number(opts.concurrency) >= 1)
  ) {
    throw new UsageError(`--concurrency must be a whole number ≥ 1 (got ${JSON.stringify(opts.concurrency)})`);
  }
  // --token is the gateway's token, as SWITCHBOARD_TOKEN sets it (a --token given and then ignored
  // left the gateway open while its operator believed it closed). One no gateway could ask for is
  // a bad flag value, refused as usage (64) like any other; a worker serves no gateway (below).
  if (mode !== "worker") checkTokenFlag(opts.token, "gateway.auth.token");
  const { config, redisExplicit, warnings, environmentWarnings, path } = loadConfig({
    ...(opts.config ? { file: opts.config } : {}),
    ...(opts.token !== undefined ? { token: opts.token } : {}),
  });
  // Once, at start-up: keys accepted for OpenClaw compatibility that change nothing here.
  // Start-up notices are plain lines on stderr, each once (not also as a JSON log line).
  for (const w of warnings) process.stderr.write(`warning: config ${w}\n`);
  // Only where turns run: a gateway alone never calls a runtime, so its environment is irrelevant.
  if (mode !== "gateway") for (const w of environmentWarnings) process.stderr.write(`warning: config ${w}\n`);
  // A worker serves no gateway: nothing of it asks for the token (nor does workers.metricsPort).
  if (mode === "worker" && opts.token !== undefined)
    process.stderr.write(
      "warning: --token has no effect on a worker: it serves no gateway (its metrics port has no auth)\n",
    );
  // Usage errors first: a bad --queues must not wait for (or be hidden behind) a Redis check.
  let queues: ReturnType<typeof parseQueueList>;
  try {
    queues = parseQueueList(opts.queues);
  } catch (err) {
    throw new UsageError(`--queues: ${(err as Error).message}`);
  }
  // Before anything starts or joins: a state dir that cannot be written would otherwise leave a
  // process that takes turns, parks every one of them and cannot record where it listens. A full
  // disk is not that: the process starts and its turns park until space returns.
  const storageFault = mode !== "gateway" ? probeStorageDir(config.storage.dir, path) : undefined;
  if (storageFault)
    process.stderr.write(
      `warning: storage: ${storageFault.message}: starting anyway, turns are parked and retried ` +
        "until storage accepts writes (docs/concepts/reliability.md)\n",
    );
  // From here on something runs that a signal must stop gracefully (see installSignalHandlers).
  const signals = installSignalHandlers();
  const stopIfSignalled = () => signals.starting.throwIfAborted();
  let embedded: EmbeddedRedis | undefined;
  try {
    embedded = await ensureRedis(config, redisExplicit, mode === "start");
    stopIfSignalled();
  } catch (err) {
    await embedded?.stop();
    exitIfAborted(err);
    throw err;
  }
  // Before taking any work: agents, runtimes and behaviour settings must match the deployment's (or --force).
  let registration: Registration;
  try {
    registration = await joinDeployment(config, {
      role: mode,
      ...(opts.force ? { force: true } : {}),
      ...(mode !== "gateway" ? { queues } : {}),
    });
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  if (signals.starting.aborted) {
    await registration.leave();
    await embedded?.stop();
    exitIfAborted(signals.starting.reason);
  }
  let system: SwitchboardSystem;
  try {
    system = await startSystem(config, {
      gateway: mode !== "worker",
      workers:
        mode === "gateway" ? false : { queues, ...(opts.concurrency ? { concurrency: Number(opts.concurrency) } : {}) },
      signal: signals.starting,
    });
  } catch (err) {
    await registration.leave();
    await embedded?.stop();
    exitIfAborted(err);
    throw err;
  }
  // Seen by /readyz, `status` and `doctor` (until a turn writes or the report expires), not only here.
  if (storageFault)
    void system.svc.storageFaults
      .onBackgroundFault({ code: storageFault.code, message: `at start-up: ${storageFault.message}` })
      .catch(() => undefined);
  // From here on a failure must not leave a half-started process behind (open gateway and worker
  // handles keep it alive, its registry record in place): close all.
  // Every step is tried even when one before it fails (the runtime file may be what failed).
  const closeAll = async () => {
    const failures: unknown[] = [];
    const attempt = async (step: () => unknown) => {
      try {
        await step();
      } catch (err) {
        failures.push(err);
      }
    };
    await attempt(() => registration.leave());
    await attempt(() => system.close());
    if (mode === "start") await attempt(() => removeRuntimeInfo(config.storage.dir));
    await attempt(() => embedded?.stop());
    if (failures.length) throw failures[0];
  };
  try {
    if (mode === "start") {
      writeRuntimeInfo(config.storage.dir, {
        pid: process.pid,
        redisUrl: config.redis.url,
        startedAt: Date.now(),
        ...(system.url ? { gatewayUrl: system.url } : {}),
      });
    }
    // The address actually bound (port 0 → the port the OS picked, 0.0.0.0 stays 0.0.0.0), then the URL to use.
    const listening = system.gateway ? formatBoundAddresses(system.gateway.app.addresses()) : undefined;
    const where =
      (system.url
        ? ` gateway listening on ${listening} at ${system.url} (Bull Board ${system.url}/admin/queues), ` +
          `auth: ${gatewayAuth(config)}`
        : "") + (system.metricsUrl ? `${system.url ? ";" : ""} metrics at ${system.metricsUrl}` : "");
    log.debug(
      {
        redis: displayRedisUrl(config.redis.url),
        storage: config.storage.dir,
        ...(listening ? { listening } : {}),
        ...(system.metricsUrl ? { metrics: system.metricsUrl } : {}),
      },
      `switchboard ${mode} ready`,
    );
    const forced = registration.record.forced
      ? " (started with --force: its agents/runtimes/settings differ from the deployment's)"
      : "";
    process.stderr.write(
      `switchboard ${mode} uses redis ${displayRedisUrl(config.redis.url)}${embedded ? " (embedded)" : ""}, ` +
        `prefix "${config.redis.prefix}"${forced}: ${sharingSummary(registration.record, registration.others)}\n`,
    );
    process.stderr.write(`switchboard ${mode} ready${where ? `:${where}` : ""}\n`);
  } catch (err) {
    await closeAll().catch((closeErr: unknown) => log.warn({ err: closeErr }, "closing after a failed start"));
    throw err;
  }
  signals.ready(closeAll);
}
