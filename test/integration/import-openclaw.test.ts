/**
 * `switchboard import openclaw` on a generated state dir of 5,000 sessions (both store
 * generations, legacy shapes and rows to skip), against a real Redis and real files:
 * a dry run writes nothing, the import writes every session and line, and a second run over
 * the unchanged state dir changes nothing at all.
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/index.js";
import { importOpenClaw, type ImportProgress, type ImportReport, type ImportTargets } from "../../src/import/index.js";
import { transcriptTopicOf } from "../../src/session/transcript-topic.js";
import { transcriptPath } from "../../src/transcript/index.js";
import { newRedis, tempDir, testConfig } from "../helpers/context.js";
import { importTargets } from "../fixtures/import-support.js";
import { generateOpenClawState, type GeneratedState } from "../fixtures/openclaw-state-gen.js";

const TOTAL = 5000;

let redis: Redis;
let config: Config;
let targets: ImportTargets;
let gen: GeneratedState;
const cleanups: (() => void)[] = [];

beforeAll(() => {
  redis = newRedis();
  config = testConfig();
  const state = tempDir("oc-state");
  cleanups.push(state.cleanup);
  gen = generateOpenClawState(state.dir, TOTAL);
  targets = importTargets(redis, config);
});

afterAll(async () => {
  await redis.quit();
  for (const c of cleanups) c();
});

function skipCounts(r: ImportReport): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of r.skipped) out[s.reason] = (out[s.reason] ?? 0) + 1;
  return out;
}

/** Every session entry and every transcript file's size and mtime: what "changes nothing" compares. */
async function snapshot(): Promise<{ entries: Record<string, string | null>; files: Record<string, string> }> {
  const keys = gen.sessions.map((s) => s.key);
  const raws = await redis.mget(keys.map((k) => targets.sessions.keys.session(k)));
  const entries = Object.fromEntries(keys.map((k, i) => [k, raws[i] ?? null]));
  const files: Record<string, string> = {};
  const agentsDir = join(config.storage.dir, "agents");
  for (const agent of readdirSync(agentsDir)) {
    for (const f of readdirSync(join(agentsDir, agent, "sessions"))) {
      const st = statSync(join(agentsDir, agent, "sessions", f));
      files[`${agent}/${f}`] = `${st.size}:${st.mtimeMs}`;
    }
  }
  return { entries, files };
}

const expectedLines = () => gen.sessions.reduce((n, s) => n + s.lines.length, 0);

describe("import openclaw: generated state dir, both generations", () => {
  it("dry run reports the plan and writes nothing", async () => {
    const r = await importOpenClaw(targets, { stateDir: gen.dir, dryRun: true, concurrency: 16 });
    expect(r.dryRun).toBe(true);
    expect(r.sessions.created).toBe(TOTAL);
    expect(r.transcripts.linesWritten).toBe(expectedLines());
    expect(await targets.sessions.count()).toBe(0);
    expect(() => readdirSync(join(config.storage.dir, "agents"))).toThrow();
  }, 60_000);

  it(`imports ${TOTAL} sessions: every entry and every line, with progress`, async () => {
    const progress: ImportProgress[] = [];
    const first = await importOpenClaw(targets, {
      stateDir: gen.dir,
      concurrency: 16,
      onProgress: (p) => progress.push({ ...p }),
    });

    expect(first.stores.json).toHaveLength(2);
    expect(first.stores.sqlite).toHaveLength(2);
    // 5,000 good rows + 6 bad rows that parse as rows (the broken-JSON SQLite row and the
    // unreadable store never become rows).
    expect(first.sessions.found).toBe(TOTAL + 6);
    expect(first.sessions.created).toBe(TOTAL);
    expect(first.sessions.updated + first.sessions.unchanged + first.sessions.keptNewer).toBe(0);
    expect(skipCounts(first)).toEqual(gen.skips);
    expect(first.transcripts.read).toBe(TOTAL);
    expect(first.transcripts.linesWritten).toBe(expectedLines());
    expect(first.transcripts.linesPresent).toBe(0);
    expect(first.transcripts.linesSkipped.unparseable).toBe(gen.unparseableLines);
    expect(await targets.sessions.count()).toBe(TOTAL);
    expect(progress[0]).toMatchObject({ phase: "scan", total: 0 });
    expect(progress.find((p) => p.phase === "import")).toMatchObject({ done: 0, total: TOTAL });
    expect(progress.at(-1)).toMatchObject({ done: TOTAL, total: TOTAL });

    // A sample of sessions, line by line, and their entries.
    for (let i = 0; i < gen.sessions.length; i += 97) {
      const s = gen.sessions[i]!;
      const entry = await targets.sessions.get(s.key);
      expect(entry, s.key).toMatchObject({ key: s.key, agentId: s.agentId, sessionId: s.sessionId, rev: 1 });
      const text = readFileSync(
        // A Telegram topic's lines are in the topic file Switchboard derives from the key.
        transcriptPath(config.storage.dir, s.agentId, s.sessionId, transcriptTopicOf(s.key)),
        "utf8",
      );
      const [head, ...rest] = text
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(head).toMatchObject({ type: "session", id: s.sessionId });
      expect(rest).toEqual(s.lines);
    }
    // Legacy shapes landed on canonical keys with Switchboard's field names.
    const legacyDm = gen.sessions[2]!; // bare `<channel>:dm:User2` with provider/lastProvider
    expect(await targets.sessions.get(legacyDm.key)).toMatchObject({
      chatType: "dm",
      channel: "slack",
      lastChannel: "slack",
      lastTo: "user2",
    });
    const topic = gen.sessions[4]!;
    expect(await targets.sessions.get(topic.key)).toMatchObject({ topicId: "4" });
  }, 120_000);

  // Runs on what the import above wrote (tests in a file run in order).
  it("a second run over the unchanged state dir changes nothing", async () => {
    expect(await targets.sessions.count()).toBe(TOTAL);
    const before = await snapshot();
    const second = await importOpenClaw(targets, { stateDir: gen.dir, concurrency: 16 });
    expect(second.sessions).toMatchObject({ created: 0, updated: 0, keptNewer: 0, unchanged: TOTAL });
    expect(second.transcripts.linesWritten).toBe(0);
    expect(second.transcripts.linesPresent).toBe(expectedLines());
    expect(skipCounts(second)).toEqual(gen.skips);
    expect(await snapshot()).toEqual(before);
  }, 120_000);
});
