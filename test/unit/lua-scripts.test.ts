/**
 * The Lua scripts: one header style, and the run statuses they treat as final are
 * TERMINAL_STATUSES itself (a generated include), never a copy that could drift.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { readLua, luaCommand } from "../../src/storage/lua-script.js";
import { TERMINAL_STATUSES, isTerminal } from "../../src/runs/run-status.js";
import { newRedis, uniquePrefix } from "../helpers/context.js";

function luaFiles(dir = "src"): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...luaFiles(join(dir, e.name)));
    else if (e.name.endsWith(".lua")) out.push(join(dir, e.name));
  }
  return out.sort();
}

const dirUrl = (file: string) => pathToFileURL(`${join(process.cwd(), file, "..")}/`);

describe("Lua script files", () => {
  const files = luaFiles();

  it("all open with the same header: what, KEYS, ARGV, returns", () => {
    expect(files.length).toBeGreaterThan(15);
    for (const f of files) {
      const text = readFileSync(f, "utf8");
      const header = /^--\[\[\n([\s\S]*?)\n\]\]\n/.exec(text)?.[1];
      expect(header, `${relative(".", f)}: header block`).toBeDefined();
      // A shared include is no script: it says who includes it instead of KEYS/ARGV.
      if (/not a script itself/.test(header!)) continue;
      expect(header, f).toMatch(/KEYS\[1\]/);
      expect(header, f).toMatch(/ARGV\[1\]/);
      expect(header, f).toMatch(/Returns/);
    }
  });

  it("never spell out terminal run statuses (they come from run-status)", () => {
    const literal = new RegExp(`==\\s*"(${TERMINAL_STATUSES.join("|")})"`);
    for (const f of files) expect(readFileSync(f, "utf8"), f).not.toMatch(literal);
  });

  it("expand a shared include once per script", () => {
    const finish = readLua(dirUrl("src/runs/lua/run-finish.lua"), "run-finish");
    // run-finish includes run-status itself and again through begin-next.
    expect(finish.match(/local TERMINAL_STATUS =/g)).toHaveLength(1);
    expect(finish).toContain("local function begin_next(");
    expect(finish).not.toMatch(/^--@include/m);
  });
});

describe("terminal statuses in Lua and TypeScript", () => {
  const redis = newRedis();
  const p = uniquePrefix("lua");
  afterAll(async () => {
    await redis.del(`{${p}}:run`, `{${p}}:late`);
    redis.disconnect();
  });

  it("a2a-mark-late treats exactly TERMINAL_STATUSES as finished", async () => {
    const markLate = luaCommand(redis, dirUrl("src/tools/lua/a2a-mark-late.lua"), "a2a-mark-late");
    const run = `{${p}}:run`;
    const late = `{${p}}:late`;
    for (const status of [...TERMINAL_STATUSES, "queued", "running", "", "OK", undefined]) {
      await redis.del(run, late);
      if (status !== undefined) await redis.hset(run, "status", status);
      const answer = await markLate([run, late], [60]);
      expect(answer, String(status)).toBe(isTerminal(status) ? status : "late");
      expect(await redis.exists(late), String(status)).toBe(isTerminal(status) ? 0 : 1);
    }
  });
});
