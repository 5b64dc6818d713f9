/**
 * `switchboard start` / `worker` that cannot finish starting exit with status 1 and leave nothing
 * behind: a state dir that cannot be created is refused before anything starts, naming the setting
 * that chose it; a failure after the system started (here: the runtime file cannot be written)
 * closes what was started and removes the registry record, instead of running on half-started.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { listProcesses } from "../../src/deployment/process-registry.js";
import { tempDir, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";

const dir = tempDir("sb-start-fail");
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
afterAll(async () => {
  redis.disconnect();
  dir.cleanup();
});

function configWith(name: string, input: Record<string, unknown>): string {
  const file = join(dir.dir, `${name}.json5`);
  writeFileSync(file, JSON.stringify(input));
  return file;
}

async function recordsOf(prefix: string) {
  return (await listProcesses(redis)).filter((p) => p.prefix === prefix);
}

describe("a state dir that cannot be created", () => {
  const aFile = join(dir.dir, "afile");
  writeFileSync(aFile, "");

  it("is refused before start joins the deployment, naming storage.dir", async () => {
    const prefix = uniquePrefix("sf");
    const cfg = configWith("st", {
      storage: { dir: join(aFile, "sub") },
      redis: { url: testRedisUrl(), prefix },
      gateway: { port: 0 },
    });
    const r = await runCli(["start", "--config", cfg], cliEnv({ HOME: dir.dir }));
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain(
      `storage.dir: cannot create or write the state dir ${join(aFile, "sub")}: ENOTDIR`,
    );
    expect(r.stderr).not.toMatch(/switchboard (start|worker) ready/);
    expect(await recordsOf(prefix)).toEqual([]);
  });

  it("names SWITCHBOARD_STATE_DIR when that chose it (worker too)", async () => {
    const prefix = uniquePrefix("sf");
    const cfg = configWith("wk", { redis: { url: testRedisUrl(), prefix } });
    const r = await runCli(
      ["worker", "--config", cfg],
      cliEnv({ HOME: dir.dir, SWITCHBOARD_STATE_DIR: join(aFile, "state") }),
    );
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toMatch(
      /SWITCHBOARD_STATE_DIR: cannot create or write the state dir .*ENOTDIR.*\(it sets storage\.dir\)/,
    );
    expect(await recordsOf(prefix)).toEqual([]);
  });
});

describe("a failure after the system started", () => {
  it("closes everything and exits 1, leaving no registry record", async () => {
    const prefix = uniquePrefix("sf");
    const state = join(dir.dir, "state-run-file");
    mkdirSync(state);
    // The state dir itself is writable, but `<state>/run` is a file: writing the runtime file
    // (after the gateway and workers started) fails.
    writeFileSync(join(state, "run"), "");
    const cfg = configWith("rf", {
      storage: { dir: state },
      redis: { url: testRedisUrl(), prefix },
      gateway: { port: 0 },
    });
    const r = await runCli(["start", "--config", cfg], cliEnv({ HOME: dir.dir }), 25_000);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toMatch(/error: (EEXIST|ENOTDIR)/);
    expect(r.stderr).not.toMatch(/switchboard (start|worker) ready/);
    expect(await recordsOf(prefix)).toEqual([]);
  }, 30_000);
});
