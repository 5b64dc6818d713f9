/**
 * `switchboard start` writes where it can be reached (gateway URL, Redis URL, pid) to
 * `<stateDir>/run/switchboard.json`, so `switchboard send/status/history` in another terminal
 * find an embedded Redis on its random port without any flags.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
  mkdirSync(join(stateDir, "run"), { recursive: true });
  writeFileSync(runtimeFilePath(stateDir), JSON.stringify(info, null, 2));
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
