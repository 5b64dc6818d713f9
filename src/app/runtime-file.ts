/**
 * `switchboard start` writes where it can be reached (gateway URL, Redis URL, pid) to
 * `<stateDir>/run/switchboard.json`, so `switchboard send/status/history` in another terminal
 * find an embedded Redis on its random port without any flags.
 */
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface RuntimeInfo {
  pid: number;
  gatewayUrl?: string;
  redisUrl: string;
  startedAt: number;
}

export function runtimeFilePath(stateDir: string): string {
  return join(stateDir, "run", "switchboard.json");
}

export function writeRuntimeInfo(stateDir: string, info: RuntimeInfo): void {
  mkdirSync(join(stateDir, "run"), { recursive: true, mode: 0o700 });
  // Owner-only: it holds the Redis URL with its password (an embedded Redis's always has one,
  // app/embedded-redis.ts), for the CLI of the same user.
  const file = runtimeFilePath(stateDir);
  writeFileSync(file, JSON.stringify(info, null, 2), { mode: 0o600 });
  chmodSync(file, 0o600); // a file left by an earlier version keeps its mode otherwise
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function readRuntimeInfo(stateDir: string): RuntimeInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(runtimeFilePath(stateDir), "utf8")) as RuntimeInfo;
    return alive(info.pid) ? info : undefined;
  } catch {
    return undefined;
  }
}

export function removeRuntimeInfo(stateDir: string): void {
  rmSync(runtimeFilePath(stateDir), { force: true });
}
