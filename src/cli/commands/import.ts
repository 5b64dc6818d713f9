/**
 * `switchboard import openclaw [stateDir] [--dry-run] [--json] [--concurrency N]`
 * Progress goes to stderr (a bar on a terminal, plain lines otherwise); the summary to stdout.
 * Exit 0 when the import ran, even with skips: the summary says what was left out and why.
 * Exit 130 (Ctrl-C) or 143 (SIGTERM) when interrupted, 1 for an error (Redis gone part-way:
 * `redis_unavailable`); either way running it again resumes, since the import is idempotent.
 */
import { createLogger } from "../../app/logger.js";
import { isRedisDown, redisFailure, ValidationError } from "../../errors/index.js";
import { UsageError } from "../flags.js";
import {
  createProgressReporter,
  formatImportSummary,
  importOpenClaw,
  removeSnapshotsSync,
  resolveOpenClawStateDir,
  type ProgressReporter,
} from "../../import/index.js";
import { CLI_COMMAND_TIMEOUT_MS, createRedis, NO_REPLY } from "../../queues/redis-connections.js";
import { RedisKeys, SessionStore } from "../../storage/index.js";
import type { RedisClient } from "../../storage/redis-client.js";
import { TranscriptStore } from "../../transcript/index.js";
import { existsSync, statSync } from "node:fs";
import { loadCliConfig, redisUnavailable, RpcCallError, type GlobalOptions } from "../client.js";
import { printJson } from "../output.js";

export interface ImportCommandOptions extends GlobalOptions {
  dryRun?: boolean;
  json?: boolean;
  concurrency?: string;
  progress?: boolean;
}

/** What every way the import can stop part-way has in common: running it again carries on. */
const IMPORT_RESUMES =
  "Running the same `switchboard import openclaw` again resumes it: what is already imported is not written twice.";

/**
 * How long a Ctrl-C waits for the import to stop between two batches (and close its stores)
 * before it stops it outright; a second Ctrl-C does not wait at all.
 */
const INTERRUPT_GRACE_MS = 3000;

/** Exit codes of a process ended by a signal, as shells report them (128 + the signal number). */
const SIGNAL_EXIT: Record<"SIGINT" | "SIGTERM", number> = { SIGINT: 130, SIGTERM: 143 };

interface Interrupt {
  signal: AbortSignal;
  /** The exit code of the signal received, once one was. */
  exitCode(): number | undefined;
  dispose(): void;
}

/**
 * Ctrl-C or SIGTERM during an import: give the terminal back at once (the bar hides the cursor
 * and turns line wrap off), say that a re-run resumes, and stop between two batches so the
 * stores are closed and the database copies removed. If that takes longer than
 * INTERRUPT_GRACE_MS, or a second signal comes, remove the copies and exit now.
 */
function onInterrupt(reporter: ProgressReporter | undefined): Interrupt {
  const ac = new AbortController();
  let code: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  const now = () => {
    removeSnapshotsSync();
    process.exit(code);
  };
  const handler = (sig: "SIGINT" | "SIGTERM") => {
    if (code !== undefined) return now();
    code = SIGNAL_EXIT[sig];
    reporter?.stop();
    process.stderr.write(`\nimport interrupted (${sig}). ${IMPORT_RESUMES}\n`);
    ac.abort(new Error(`interrupted by ${sig}`));
    timer = setTimeout(now, INTERRUPT_GRACE_MS);
    timer.unref();
  };
  const onInt = () => handler("SIGINT");
  const onTerm = () => handler("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  // However the process ends (an error, process.exit elsewhere), no database copy stays behind.
  process.on("exit", removeSnapshotsSync);
  return {
    signal: ac.signal,
    exitCode: () => code,
    dispose() {
      clearTimeout(timer);
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      process.off("exit", removeSnapshotsSync);
    },
  };
}

/** `err`, or an error in its `cause` chain, is Redis away (refused, closed, out of retries, timed out). */
function redisDownIn(err: unknown): Error | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (isRedisDown(e)) return e;
  return undefined;
}

/**
 * A Redis failure part-way through, as every command reports it (redis_unavailable, or
 * redis_full), plus what the import adds: running it again resumes. Anything else unchanged.
 */
function importFailure(url: string, err: unknown, lastConnectionError: string | undefined): unknown {
  const down = redisDownIn(err);
  if (down) {
    const cause =
      down.message === "Command timed out"
        ? `${NO_REPLY} within ${CLI_COMMAND_TIMEOUT_MS / 1000} s`
        : (lastConnectionError ?? down.message);
    return new RpcCallError(
      "redis_unavailable",
      `${redisUnavailable(url, cause).message} The import stopped part-way. ${IMPORT_RESUMES}`,
    );
  }
  const failure = redisFailure(err);
  if (failure?.code === "redis_full")
    return new RpcCallError("redis_full", `${failure.message}. The import stopped part-way. ${IMPORT_RESUMES}`);
  return err;
}

async function closeRedis(redis: RedisClient): Promise<void> {
  // QUIT to a Redis that is gone would wait for a reconnect that is not coming.
  if (redis.status !== "ready") {
    redis.disconnect();
    return;
  }
  await redis.quit().catch(() => redis.disconnect());
}

export async function importOpenClawCommand(
  stateDirArg: string | undefined,
  opts: ImportCommandOptions,
): Promise<number> {
  const concurrency = opts.concurrency === undefined ? 8 : Number(opts.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) {
    throw new UsageError(
      `--concurrency must be a whole number from 1 to 256 (got ${JSON.stringify(opts.concurrency)})`,
    );
  }
  const stateDir = resolveOpenClawStateDir(stateDirArg);
  if (!existsSync(stateDir))
    throw new ValidationError(
      `OpenClaw state dir not found: ${stateDir} (pass it as: switchboard import openclaw <stateDir>)`,
    );
  if (!statSync(stateDir).isDirectory())
    throw new ValidationError(`not a directory: ${stateDir} (pass OpenClaw's state dir, e.g. ~/.openclaw)`);

  const { config } = loadCliConfig(opts);
  const log = createLogger("switchboard-import");
  // A CLI connection: its reconnects are logged at debug only, the error line says what happened.
  const redis = createRedis(config.redis.url, "cli", log);
  // The connection's own error (ECONNREFUSED…) says more than ioredis's "max retries per request".
  let lastConnectionError: string | undefined;
  redis.on("error", (err: Error) => (lastConnectionError = err.message));
  const keys = new RedisKeys(config.redis.prefix);
  const reporter = opts.progress === false ? undefined : createProgressReporter(process.stderr);
  const interrupt = onInterrupt(reporter);
  try {
    await redis.ping().catch((err: Error) => {
      throw redisUnavailable(config.redis.url, lastConnectionError ?? err.message);
    });
    let report: Awaited<ReturnType<typeof importOpenClaw>>;
    try {
      report = await importOpenClaw(
        {
          config,
          redis,
          sessions: new SessionStore(redis, config.redis.prefix),
          // Same key base as the running system, so transcript locks and indexes are shared.
          transcripts: new TranscriptStore({ redis, keys, storageDir: config.storage.dir }),
        },
        {
          stateDir,
          dryRun: opts.dryRun ?? false,
          concurrency,
          signal: interrupt.signal,
          ...(reporter ? { onProgress: (p) => reporter.update(p) } : {}),
        },
      );
    } catch (err) {
      // Stopped by the signal (the line saying so is out already): the shell's exit code for it.
      const code = interrupt.exitCode();
      if (code !== undefined) return code;
      throw importFailure(config.redis.url, err, lastConnectionError);
    }
    reporter?.stop();
    if (opts.json) printJson(report);
    else process.stdout.write(formatImportSummary(report));
    // A dir that holds no session store at all is most likely the wrong one: say so, and fail.
    if (report.stores.json.length + report.stores.sqlite.length === 0) {
      process.stderr.write(
        `no OpenClaw session store under ${stateDir} (looked for agents/*/sessions/sessions.json and ` +
          "agents/*/agent/openclaw-agent.sqlite): is this OpenClaw's state dir?\n",
      );
      return 1;
    }
    return 0;
  } finally {
    reporter?.stop();
    interrupt.dispose();
    await closeRedis(redis);
  }
}
