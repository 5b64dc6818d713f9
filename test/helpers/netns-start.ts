/**
 * `switchboard start` with no Redis configured, in a private network namespace (unshare): the
 * default URL (127.0.0.1:6379) answers on this machine and must never be used nor stopped, so the
 * start and everything that talks to it run where nothing listens on 6379.
 */
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cliEnv } from "./cli-run.js";
import { CLI, ROOT } from "./system.js";

/** The `unshare` flags that give this process a private network namespace here, or an error saying what is missing. */
export function privateNetnsArgs(): string[] {
  const args = [["-rn"], ["-n"]].find(
    (a) => spawnSync("unshare", [...a, "sh", "-c", "ip link set lo up"], { stdio: "ignore" }).status === 0,
  );
  if (!args) {
    throw new Error(
      "this test needs a private network namespace to hide the machine's Redis on 6379 without stopping it: " +
        "`unshare -rn` (unprivileged user namespaces) or `unshare -n` (root), plus `ip` (iproute2)",
    );
  }
  return args;
}

export interface NetnsRun {
  res: SpawnSyncReturns<string>;
  /** A file the script wrote to $OUT, or `(missing <f>)`. */
  read(f: string): string;
  /** The exit, stderr and start.log, for assertion messages. */
  diag: string;
  /** redis-servers left with this state dir (already SIGKILLed): none is expected. */
  leaked: string[];
}

/**
 * Run a bash `script` in a private network namespace with $NODE, $CLI, $CFG, $OUT and $STATE set
 * (HOME `home`, SWITCHBOARD_STATE_DIR `stateDir`, LOG_LEVEL info, no REDIS_URL); then kill any
 * redis-server of `stateDir` it left (same pid space inside and out) and report it, and any
 * process still running with `cfg` (a script cut off by the timeout).
 */
export function runInPrivateNetns(
  script: string,
  dirs: { home: string; stateDir: string; cfg: string; out: string },
  timeoutMs: number,
): NetnsRun {
  const netns = privateNetnsArgs();
  const { home, stateDir, cfg, out } = dirs;
  const res = spawnSync("unshare", [...netns, "bash", "-c", script], {
    cwd: ROOT,
    env: cliEnv({
      HOME: home,
      SWITCHBOARD_STATE_DIR: stateDir,
      LOG_LEVEL: "info",
      NODE: process.execPath,
      CLI,
      CFG: cfg,
      OUT: out,
      STATE: stateDir,
    }),
    encoding: "utf8",
    timeout: timeoutMs,
  });
  const read = (f: string) => (existsSync(join(out, f)) ? readFileSync(join(out, f), "utf8") : `(missing ${f})`);
  const diag =
    `unshare ${netns.join(" ")}: exit ${res.status} ${res.error?.message ?? ""}\n${res.stderr}\n` +
    `start.log:\n${read("start.log")}`;
  const leaked = processesWith(join(stateDir, "redis"));
  // A script cut off by the timeout leaves its `switchboard start` running (only unshare is
  // killed): not a finding of the test, but it must not run on under the rest of the suite.
  for (const pid of [...leaked, ...processesWith(cfg)]) process.kill(Number(pid), "SIGKILL");
  return { res, read, diag, leaked };
}

/** Pids of the processes whose command line contains `text`. */
function processesWith(text: string): string[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(text);
      } catch {
        return false;
      }
    });
}
