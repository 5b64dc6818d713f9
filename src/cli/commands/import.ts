/**
 * `switchboard import openclaw [stateDir] [--dry-run] [--json] [--concurrency N]`
 * Progress goes to stderr (a bar on a terminal, plain lines otherwise); the summary to stdout.
 * Exit 0 when the import ran, even with skips: the summary says what was left out and why.
 */
import { createLogger } from "../../app/logger.js";
import { ValidationError } from "../../errors/index.js";
import {
  createProgressReporter,
  formatImportSummary,
  importOpenClaw,
  resolveOpenClawStateDir,
} from "../../import/index.js";
import { createRedis } from "../../queues/redis-connections.js";
import { RedisKeys, SessionStore } from "../../storage/index.js";
import { TranscriptStore } from "../../transcript/index.js";
import { existsSync, statSync } from "node:fs";
import { loadCliConfig, type GlobalOptions } from "../client.js";
import { printJson } from "../output.js";
import { displayRedisUrl } from "../../config/redis-url.js";

export interface ImportCommandOptions extends GlobalOptions {
  dryRun?: boolean;
  json?: boolean;
  concurrency?: string;
  progress?: boolean;
}

export async function importOpenClawCommand(
  stateDirArg: string | undefined,
  opts: ImportCommandOptions,
): Promise<number> {
  const concurrency = opts.concurrency === undefined ? 8 : Number(opts.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) {
    throw new ValidationError(
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
  const redis = createRedis(config.redis.url, "producer", log);
  const keys = new RedisKeys(config.redis.prefix);
  const reporter = opts.progress === false ? undefined : createProgressReporter(process.stderr);
  try {
    await redis.ping().catch((err: Error) => {
      throw new ValidationError(
        `Redis does not answer at ${displayRedisUrl(config.redis.url)} (${err.message}): start Redis or set redis.url`,
      );
    });
    const report = await importOpenClaw(
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
        ...(reporter ? { onProgress: (p) => reporter.update(p) } : {}),
      },
    );
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
    await redis.quit().catch(() => redis.disconnect());
  }
}
