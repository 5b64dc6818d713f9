/**
 * An imported Telegram forum-topic session keeps its history. OpenClaw names a topic session's
 * transcript `<sessionId>-topic-<n>.jsonl` (its SQLite store has no file name at all), and
 * Switchboard reads, appends and archives the file it derives from the session key: the import
 * must put the lines there, so `chat.history` shows them, the next live turn follows them in the
 * same file, and a reset archives that one file.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importOpenClaw } from "../../src/import/index.js";
import { importTargets, legacySqliteStore } from "../fixtures/import-support.js";
import { history, inbound, sessionFiles, waitRun } from "../helpers/api.js";
import { newRedis, tempDir } from "../helpers/context.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
let redis: Redis;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  redis = newRedis();
  sys = await startTestSystem({ session: { reset: { mode: "off" } } });
});

afterAll(async () => {
  await sys?.close();
  await redis?.quit();
  for (const c of cleanups) c();
});

function stateDir(): string {
  const s = tempDir("oc-topic");
  cleanups.push(s.cleanup);
  return s.dir;
}

const event = (id: string, role: string, text: string, ago: number) => ({
  type: "message",
  id,
  timestamp: new Date(Date.now() - ago).toISOString(),
  message: { role, content: [{ type: "text", text }] },
});

const textOf = (m: { content: unknown }): string =>
  typeof m.content === "string" ? m.content : (m.content as { text?: string }[]).map((b) => b.text ?? "").join("");

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("import openclaw: Telegram forum topics", () => {
  it("a JSON-store topic transcript lands where chat.history, the next turn and a reset find it", async () => {
    const dir = stateDir();
    const sdir = join(dir, "agents", "main", "sessions");
    mkdirSync(sdir, { recursive: true });
    const key = "agent:main:telegram:group:-1001:topic:99";
    const sid = "0b5e7c1a-1111-4222-8333-944455556666";
    writeFileSync(
      join(sdir, "sessions.json"),
      JSON.stringify({
        [key]: { sessionId: sid, updatedAt: Date.now() - 60_000, chatType: "group", channel: "telegram" },
      }),
    );
    writeFileSync(
      join(sdir, `${sid}-topic-99.jsonl`),
      `${[
        { type: "session", version: 3, id: sid, timestamp: new Date(Date.now() - 120_000).toISOString() },
        event("a1", "user", "hello topic 99", 110_000),
        event("a2", "assistant", "hi there", 100_000),
      ]
        .map((l) => JSON.stringify(l))
        .join("\n")}\n`,
    );

    const report = await importOpenClaw(importTargets(redis, sys.config), { stateDir: dir });
    expect(report.sessions.created).toBe(1);
    expect(report.transcripts.linesWritten).toBe(2);
    expect(sessionFiles(sys)).toEqual([`${sid}-topic-99.jsonl`]);
    expect((await history(sys, key)).map(textOf)).toEqual(["hello topic 99", "hi there"]);

    // A dry run after the import finds every line already there (it looks in the same file).
    const dry = await importOpenClaw(importTargets(redis, sys.config), { stateDir: dir, dryRun: true });
    expect(dry.transcripts).toMatchObject({ linesWritten: 0, linesPresent: 2 });

    // The next message in the topic continues the imported session in the same file.
    const r = await inbound(sys, {
      channel: "telegram",
      chatType: "group",
      from: "u1",
      groupId: "-1001",
      threadId: 99,
      text: "what did I say before?",
    });
    expect(r).toMatchObject({ sessionKey: key, sessionId: sid });
    await waitRun(sys, r.runId);
    const after = (await history(sys, key)).map(textOf);
    expect(after.slice(0, 3)).toEqual(["hello topic 99", "hi there", "what did I say before?"]);
    expect(sessionFiles(sys)).toEqual([`${sid}-topic-99.jsonl`]);

    // A reset archives that file: nothing of the imported session is left behind.
    await sys.rpc("sessions.reset", { key });
    await until(() => sessionFiles(sys).some((f) => f.startsWith(`${sid}-topic-99.jsonl.reset.`)));
    expect(sessionFiles(sys).filter((f) => f.startsWith(sid) && !f.includes(".reset."))).toEqual([]);
  });

  it("a SQLite-store topic session (no file name in OpenClaw) is written to the topic file", async () => {
    const dir = stateDir();
    const key = "agent:main:telegram:group:-1002:topic:7";
    const sid = "s-sqlite-topic-7";
    legacySqliteStore(dir, [
      {
        key,
        sessionId: sid,
        entry: { updatedAt: Date.now() - 60_000, chatType: "group", channel: "telegram" },
        events: [event("b1", "user", "topic seven", 50_000), event("b2", "assistant", "noted", 40_000)].map((e) =>
          JSON.stringify(e),
        ),
      },
    ]);

    const report = await importOpenClaw(importTargets(redis, sys.config), { stateDir: dir });
    expect(report.transcripts.linesWritten).toBe(2);
    expect(sessionFiles(sys)).toContain(`${sid}-topic-7.jsonl`);
    expect(sessionFiles(sys)).not.toContain(`${sid}.jsonl`);
    expect((await history(sys, key)).map(textOf)).toEqual(["topic seven", "noted"]);
  });
});
