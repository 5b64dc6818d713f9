/**
 * `switchboard import openclaw` run again after the cutover, and on long sessions: a session
 * Switchboard has moved on with is kept whole (entry and transcript), its missing OpenClaw lines
 * reported rather than appended after Switchboard's newer turns; progress moves with every batch
 * of lines of one long session; and sessions in an agent directory linked from another disk arrive.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/index.js";
import {
  formatImportSummary,
  importOpenClaw,
  type ImportProgress,
  type ImportTargets,
} from "../../src/import/index.js";
import { transcriptPath } from "../../src/transcript/index.js";
import { importTargets } from "../fixtures/import-support.js";
import { newRedis, tempDir, testConfig } from "../helpers/context.js";

let redis: Redis;
const cleanups: (() => void)[] = [];

beforeAll(() => {
  redis = newRedis();
});

afterAll(async () => {
  await redis.quit();
  for (const c of cleanups) c();
});

function fresh(): { config: Config; targets: ImportTargets; stateDir: string; sessions: string } {
  const config = testConfig();
  const state = tempDir("oc-rerun");
  cleanups.push(state.cleanup);
  const sessions = join(state.dir, "agents", "main", "sessions");
  mkdirSync(sessions, { recursive: true });
  return { config, targets: importTargets(redis, config), stateDir: state.dir, sessions };
}

const line = (id: string, content: string) =>
  JSON.stringify({ type: "message", id, timestamp: "2026-01-01T00:00:00.000Z", message: { role: "user", content } });

describe("import openclaw: again, after the cutover", () => {
  it("a session newer in Switchboard is kept whole: OpenClaw's later lines are counted, not appended", async () => {
    const { config, targets, stateDir, sessions } = fresh();
    const key = "agent:main:telegram:dm:4242";
    const t0 = Date.now() - 120_000;
    const store = (updatedAt: number) =>
      writeFileSync(
        join(sessions, "sessions.json"),
        JSON.stringify({ [key]: { sessionId: "late-1", updatedAt, chatType: "direct" } }),
      );
    store(t0);
    writeFileSync(join(sessions, "late-1.jsonl"), `${line("oc-1", "openclaw msg 1")}\n`);
    expect((await importOpenClaw(targets, { stateDir })).sessions.created).toBe(1);

    // A turn in Switchboard: its transcript grows, the entry's updatedAt moves to now.
    await targets.transcripts.append("main", "late-1", [
      {
        type: "message",
        id: "sb-1",
        parentId: "oc-1",
        timestamp: new Date().toISOString(),
        message: { role: "user", content: "first message in switchboard" },
      },
    ]);
    const entry = (await targets.sessions.get(key))!;
    await targets.sessions.upsert(key, { agentId: "main", kind: entry.kind }, { lastChannel: "telegram" });
    const file = transcriptPath(config.storage.dir, "main", "late-1");
    const before = readFileSync(file, "utf8");

    // OpenClaw, still running, wrote one more line before that turn (its updatedAt is older).
    store(t0 + 60_000);
    writeFileSync(
      join(sessions, "late-1.jsonl"),
      `${line("oc-1", "openclaw msg 1")}\n${line("oc-2", "late openclaw msg")}\n`,
    );

    const dry = await importOpenClaw(targets, { stateDir, dryRun: true });
    expect(dry.sessions).toMatchObject({ keptNewer: 1, updated: 0 });
    expect(dry.transcripts).toMatchObject({ linesWritten: 0, linesNotImported: 1, linesPresent: 1 });

    const again = await importOpenClaw(targets, { stateDir });
    expect(again.sessions).toMatchObject({ keptNewer: 1, updated: 0, created: 0 });
    expect(again.transcripts).toMatchObject({ linesWritten: 0, linesNotImported: 1, linesPresent: 1 });
    expect(readFileSync(file, "utf8")).toBe(before);
    expect(again.warnings).toEqual([
      `${key}: 1 OpenClaw transcript line(s) not imported: the session is newer in Switchboard, ` +
        "and they would come after its newer turns",
    ]);
    expect(formatImportSummary(again)).toContain(
      "1 already present, 1 not imported (session newer in Switchboard), 0 lines skipped",
    );
  });
});

describe("import openclaw: progress and links", () => {
  it("one session of 5,000 lines reports progress per batch of lines, after the scan reported its own", async () => {
    const { targets, stateDir, sessions } = fresh();
    writeFileSync(
      join(sessions, "sessions.json"),
      JSON.stringify({ "agent:main:main": { sessionId: "big-1", updatedAt: 1 } }),
    );
    writeFileSync(
      join(sessions, "big-1.jsonl"),
      `${Array.from({ length: 5000 }, (_, i) => line(`l${i}`, `line ${i}`)).join("\n")}\n`,
    );
    const seen: ImportProgress[] = [];
    await importOpenClaw(targets, { stateDir, onProgress: (p) => seen.push({ ...p }) });
    expect(seen[0]).toMatchObject({ phase: "scan", found: 1 });
    const during = seen.filter((p) => p.phase === "import" && p.done === 0).map((p) => p.lines);
    expect(during).toEqual([0, 1000, 2000, 3000, 4000, 5000]);
    expect(seen.at(-1)).toMatchObject({ phase: "import", done: 1, total: 1, lines: 5000 });
  });

  it("an agent directory that is a symlink to another disk is imported like any other", async () => {
    const { config, targets, stateDir } = fresh();
    const other = tempDir("oc-disk");
    cleanups.push(other.cleanup);
    const moved = join(other.dir, "ops", "sessions");
    mkdirSync(moved, { recursive: true });
    writeFileSync(
      join(moved, "sessions.json"),
      JSON.stringify({ "agent:ops:main": { sessionId: "o-1", updatedAt: 1 } }),
    );
    writeFileSync(join(moved, "o-1.jsonl"), `${line("o1", "from the other disk")}\n`);
    symlinkSync(join(other.dir, "ops"), join(stateDir, "agents", "ops"));
    const report = await importOpenClaw(targets, { stateDir });
    expect(report.sessions.created).toBe(1);
    expect(report.transcripts.linesWritten).toBe(1);
    expect(report.skipped).toEqual([]);
    expect(await targets.sessions.get("agent:ops:main")).toMatchObject({ sessionId: "o-1" });
    expect(readFileSync(transcriptPath(config.storage.dir, "ops", "o-1"), "utf8")).toContain("from the other disk");
  });
});
