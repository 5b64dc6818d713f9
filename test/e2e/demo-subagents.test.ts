/**
 * examples/subagents.json5 with `switchboard start` and the CLI: main spawns two researchers,
 * both results come back as completion turns and main reports each once. Real processes; the
 * example is used as shipped, only isolated (prefix, state dir, port).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import JSON5 from "json5";
import { CLI, ROOT, spawnSwitchboard, type ChildHandle } from "../helpers/system.js";
import { tempDir, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";

const run = promisify(execFile);
let start: ChildHandle;
let env: Record<string, string>;
let configFile: string;

beforeAll(async () => {
  const demo = JSON5.parse(readFileSync(join(ROOT, "examples/subagents.json5"), "utf8")) as Record<string, unknown>;
  const { dir } = tempDir("sb-demo-sa");
  configFile = join(dir, "subagents.json5");
  writeFileSync(
    configFile,
    JSON.stringify({ ...demo, redis: { url: testRedisUrl(), prefix: uniquePrefix("demosa") }, gateway: { port: 0 } }),
  );
  env = { SWITCHBOARD_STATE_DIR: join(dir, "state"), HOME: dir, LOG_LEVEL: "warn" };
  start = await spawnSwitchboard(["start", "--config", configFile], env);
});
afterAll(async () => {
  await start?.stop();
});

async function cli(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, ...args, "--config", configFile], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  return stdout;
}

describe("examples/subagents.json5 with switchboard start", () => {
  it("main spawns two researchers and reports each result once", async () => {
    expect((await cli("send", "main", "research tides", "--wait", "15")).trim()).toBe(
      "Main: two researchers are on it (accepted, accepted). Their results will follow.",
    );
    const history = await settle(
      async () => {
        const h = await cli("history", "main");
        return (h.match(/researcher reports/g) ?? []).length >= 2 ? h : undefined;
      },
      { what: "both researchers' reports in main's history", timeoutMs: 20_000, stepMs: 200 },
    );
    expect(history).toContain(
      "Main: the history researcher reports: the history of tides: three sources agree, one disagrees.",
    );
    expect(history).toContain(
      "Main: the economics researcher reports: the economics of tides: three sources agree, one disagrees.",
    );
    expect(history!.match(/the history researcher reports/g)).toHaveLength(1);
  }, 60_000);
});
