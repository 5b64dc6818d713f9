/**
 * `switchboard import openclaw` on a state dir written by the real OpenClaw 2026.9.6
 * (test/fixtures/openclaw-state/README.md): every session and transcript event arrives, keys
 * are canonical, and a second run changes nothing.
 */
import { cpSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import type { Redis } from "ioredis";
import sqlite from "node-sqlite3-wasm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/index.js";
import { importOpenClaw, type ImportTargets } from "../../src/import/index.js";
import { topicOpt, transcriptTopicOf } from "../../src/session/transcript-topic.js";
import { transcriptPath } from "../../src/transcript/index.js";
import { importTargets } from "../fixtures/import-support.js";
import { newRedis, tempDir, testConfig } from "../helpers/context.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/openclaw-state", import.meta.url));

let redis: Redis;
let config: Config;
let targets: ImportTargets;
let stateDir: string;
let cleanup: () => void;

/** Copies the fixture and gunzips the databases: a state dir as OpenClaw left it. */
function materialise(to: string): void {
  cpSync(FIXTURE, to, { recursive: true });
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith(".sqlite.gz")) {
        writeFileSync(p.slice(0, -3), gunzipSync(readFileSync(p)));
        rmSync(p);
      }
    }
  };
  walk(to);
}

/** The transcript events OpenClaw stored for each session, straight from its databases. */
function openClawEvents(): Map<string, { agentId: string; sessionId: string; events: Record<string, unknown>[] }> {
  const out = new Map<string, { agentId: string; sessionId: string; events: Record<string, unknown>[] }>();
  for (const agentId of readdirSync(join(stateDir, "agents"))) {
    // A WAL-mode database opens in WebAssembly only with exclusive locking (no shared memory).
    const db = new sqlite.Database(join(stateDir, "agents", agentId, "agent", "openclaw-agent.sqlite"), {
      fileMustExist: true,
    });
    try {
      db.exec("PRAGMA locking_mode=EXCLUSIVE");
      for (const row of db.all("SELECT session_key, current_session_id FROM session_nodes") as {
        session_key: string;
        current_session_id: string;
      }[]) {
        const events = (
          db.all("SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq", [
            row.current_session_id,
          ]) as { event_json: string }[]
        ).map((r) => JSON.parse(r.event_json) as Record<string, unknown>);
        out.set(row.session_key, { agentId, sessionId: row.current_session_id, events });
      }
    } finally {
      db.close();
    }
  }
  return out;
}

beforeAll(() => {
  redis = newRedis();
  config = testConfig({ agents: { list: [{ id: "main", default: true }, { id: "ops" }] } });
  const tmp = tempDir("oc-real");
  cleanup = tmp.cleanup;
  stateDir = join(tmp.dir, "state");
  materialise(stateDir);
  targets = importTargets(redis, config);
});

afterAll(async () => {
  await redis.quit();
  cleanup();
});

describe("import openclaw: state written by the real OpenClaw 2026.9.6", () => {
  it("imports every session and event, canonically keyed, and a second run changes nothing", async () => {
    const source = openClawEvents();
    expect(source.size).toBe(6);

    const first = await importOpenClaw(targets, { stateDir });
    expect(first.stores.sqlite).toHaveLength(2);
    expect(first.skipped).toEqual([]);
    expect(first.sessions).toMatchObject({ found: 6, created: 6, skipped: 0 });

    const keys = (await targets.sessions.list({ limit: 100 })).map((e) => e.key).sort();
    expect(keys).toEqual([
      "agent:main:discord:dm:4242", // OpenClaw's `direct` key in Switchboard's spelling
      "agent:main:main",
      "agent:main:slack:channel:c1:thread:1699999999.0001",
      "agent:main:telegram:group:-1001234567890:topic:99",
      "agent:ops:cron:nightly",
      "agent:ops:main",
    ]);

    let lines = 0;
    for (const [rawKey, s] of source) {
      const key = rawKey.replace(":direct:", ":dm:");
      const entry = await targets.sessions.get(key);
      expect(entry, key).toMatchObject({ sessionId: s.sessionId, agentId: s.agentId });
      const file = readFileSync(
        // A Telegram topic's lines are in the topic file Switchboard derives from the key.
        transcriptPath(config.storage.dir, s.agentId, s.sessionId, transcriptTopicOf(key)),
        "utf8",
      );
      const [head, ...rest] = file
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(head).toMatchObject({ type: "session", id: s.sessionId });
      // OpenClaw's own header row (seq 0) is replaced by Switchboard's; every other event is kept as is.
      expect(s.events[0]).toMatchObject({ type: "session", id: s.sessionId });
      expect(rest).toEqual(s.events.slice(1));
      lines += rest.length;
    }
    expect(first.transcripts.linesWritten).toBe(lines);

    // The user turns read back through the same path as `chat.history`.
    const topic = source.get("agent:main:telegram:group:-1001234567890:topic:99")!;
    const messages = await targets.transcripts.messages(
      "main",
      topic.sessionId,
      50,
      topicOpt("agent:main:telegram:group:-1001234567890:topic:99"),
    );
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(messages[0]!.content).toBe("hello topic 99");

    const revs = (await targets.sessions.list({ limit: 100 })).map((e) => [e.key, e.rev, e.updatedAt]);
    const second = await importOpenClaw(targets, { stateDir });
    expect(second.sessions).toMatchObject({ created: 0, updated: 0, unchanged: 6 });
    expect(second.transcripts).toMatchObject({ linesWritten: 0, linesPresent: lines });
    expect((await targets.sessions.list({ limit: 100 })).map((e) => [e.key, e.rev, e.updatedAt])).toEqual(revs);
  });
});
