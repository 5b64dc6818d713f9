/**
 * Running the `switchboard` CLI as a child process (dist/src/cli/main.js) and collecting what it
 * printed and how it exited.
 */
import { spawn } from "node:child_process";
import { CLI, ROOT } from "./system.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Environment for CLI children: nothing inherited that could point them elsewhere. */
export function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "warn" };
  for (const k of [
    "REDIS_URL",
    "SWITCHBOARD_URL",
    "SWITCHBOARD_TOKEN",
    "SWITCHBOARD_CONFIG",
    "SWITCHBOARD_PORT",
    "SWITCHBOARD_STATE_DIR",
    "CI",
  ])
    delete env[k];
  return { ...env, ...extra };
}

export function runCli(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `switchboard ${args.join(" ")} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, timeoutMs);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export const show = (r: CliResult): string => `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
