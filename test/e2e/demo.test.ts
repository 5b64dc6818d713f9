/**
 * Issue "cross-session tools", done-criterion: the demo config (two agents talking through
 * sessions_send) runs with `switchboard start` and shows the exchange in `switchboard history`.
 * Real processes; the demo file is used as shipped, only isolated (prefix, state dir, port).
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
  const demo = JSON5.parse(readFileSync(join(ROOT, "examples/two-agents.json5"), "utf8")) as Record<string, unknown>;
  const { dir } = tempDir("sb-demo");
  configFile = join(dir, "two-agents.json5");
  writeFileSync(
    configFile,
    JSON.stringify({ ...demo, redis: { url: testRedisUrl(), prefix: uniquePrefix("demo") }, gateway: { port: 0 } }),
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

describe("examples/two-agents.json5 with switchboard start", () => {
  it("alice asks bob through sessions_send; both transcripts show the exchange", async () => {
    expect((await cli("send", "main", "ask bob what is the plan", "--wait", "15")).trim()).toBe(
      "Bob says: The plan for 'what is the plan': ship on Friday, review on Monday.",
    );
    // The reply-back loop and the announce step run after the send returned.
    const bob = await settle(
      async () => {
        const out = await cli("history", "agent:bob:main");
        return out.includes("Agent-to-agent announce step.") && out.includes("Bob: I answered a question from Alice.")
          ? out
          : "";
      },
      { what: "the announce step and bob's answer in his history", timeoutMs: 15_000 },
    );
    expect(bob).toContain("user ← agent:alice:main: what is the plan");
    expect(bob).toContain("assistant: The plan for 'what is the plan': ship on Friday, review on Monday.");
    expect(bob).toContain("user ← agent:alice:main: Thanks, Bob, that settles it.");
    expect(bob).toContain("assistant: REPLY_SKIP");
    const alice = await cli("history", "main");
    expect(alice).toContain("user: ask bob what is the plan");
    expect(alice).toContain("[tool sessions_send]");
    expect(alice).toContain("user ← agent:bob:main: The plan for 'what is the plan'");
    expect(alice).toContain("assistant: Thanks, Bob, that settles it.");
  });
});
