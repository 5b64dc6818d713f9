/**
 * `switchboard doctor [--json] [--alive <role>]`: is this deployment healthy, and if not, why and
 * what to do. Exit 0 when no check failed (warnings allowed), 1 otherwise, with the reasons; 64
 * for a bad flag value.
 */
import { hostname } from "node:os";
import { ConfigError } from "../../errors/index.js";
import { readRuntimeInfo } from "../../app/runtime-file.js";
import { listProcesses, redisTimeMs } from "../../deployment/process-registry.js";
import {
  checkDeployment,
  checkGateway,
  checkQueues,
  checkRedis,
  checkStorage,
  checkStorageFault,
  judgeAlive,
  probeRedis,
} from "../../doctor/checks.js";
import { formatReport, verdict, type Finding } from "../../doctor/report.js";
import type { Config } from "../../config/schema.js";
import {
  cliToken,
  directClientFor,
  explicitGatewayUrl,
  gatewayCandidates,
  loadCliConfig,
  type GlobalOptions,
} from "../client.js";
import { UsageError } from "../flags.js";
import { printJson } from "../output.js";
import { updateProgress } from "../progress.js";
import { displayRedisUrl } from "../../config/redis-url.js";

const ALIVE_ROLES = ["worker", "gateway", "start", "any"];

export async function doctorCommand(opts: GlobalOptions & { json?: boolean; alive?: string }): Promise<number> {
  if (opts.alive !== undefined && !ALIVE_ROLES.includes(opts.alive)) {
    // Usage (exit 64), not 1: a health check with a mistyped role must not read as an unhealthy process.
    throw new UsageError(`--alive must be one of ${ALIVE_ROLES.join(", ")} (got ${JSON.stringify(opts.alive)})`);
  }
  const findings = await examine(opts);
  const v = verdict(findings);
  if (opts.json) printJson({ healthy: v.healthy, findings });
  else process.stdout.write(formatReport(findings));
  return v.healthy ? 0 : 1;
}

async function examine(opts: GlobalOptions & { alive?: string }): Promise<Finding[]> {
  const findings: Finding[] = [];
  let loaded: ReturnType<typeof loadCliConfig>;
  try {
    loaded = loadCliConfig(opts);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const where = err.source ?? "the configuration";
    return err.issues.map((i) => ({
      check: "config",
      level: "fail",
      message: `${where}: ${i.path}: ${i.message}`,
      fix: "switchboard config validate",
    }));
  }
  const { config } = loaded;
  if (!opts.alive) {
    findings.push({
      check: "config",
      level: "ok",
      message: loaded.path ?? "no config file: defaults and environment variables",
    });
    for (const w of loaded.warnings) findings.push({ check: "config", level: "warn", message: w });
    for (const w of loaded.environmentWarnings)
      findings.push({ check: "config", level: "warn", message: w, fix: "set the variable where workers run" });
  }

  updateProgress(`connecting to Redis at ${displayRedisUrl(config.redis.url)}…`);
  const probe = await probeRedis(config.redis.url);
  if (!probe.redis) {
    findings.push({
      check: "redis",
      level: "fail",
      message: `${displayRedisUrl(config.redis.url)} does not answer (${probe.error})`,
      fix: `start Redis, or set REDIS_URL / redis.url in ${loaded.path ?? "a config file (--config)"}`,
    });
    return opts.alive ? findings : [...findings, ...checkStorage(config)];
  }
  const redis = probe.redis;
  try {
    if (opts.alive) {
      const [all, now] = await Promise.all([listProcesses(redis), redisTimeMs(redis)]);
      return [judgeAlive(opts.alive, hostname(), config.redis.prefix, all, now)];
    }
    findings.push(...(await checkRedis(redis, config.redis.url)));
    updateProgress("checking storage…");
    findings.push(...checkStorage(config));
    updateProgress("reading queues and processes…");
    const client = await directClientFor(config);
    try {
      findings.push(...(await checkStorageFault(client.svc!)));
      findings.push(...(await checkQueues(client.svc!)));
    } finally {
      await client.close();
    }
    findings.push(...(await checkDeployment(redis, config)));
  } finally {
    redis.disconnect();
  }
  findings.push(...(await gatewayFindings(opts, config)));
  return findings;
}

/**
 * The gateway the CLI would use (client.ts, `connect`): the named one, else the one
 * `switchboard start` recorded, else where the config says one listens.
 */
async function gatewayFindings(opts: GlobalOptions, config: Config): Promise<Finding[]> {
  const named = explicitGatewayUrl(opts);
  const candidates = gatewayCandidates(config);
  const base = named ?? candidates[0];
  if (!base) return [];
  updateProgress(`asking the gateway at ${base}…`);
  const implicit = !named && !readRuntimeInfo(config.storage.dir);
  return await checkGateway(base, cliToken(opts, config), implicit);
}
