/**
 * What `switchboard import openclaw` does before it writes anything, and its reports: agent
 * directories that are symlinks (another disk) are read, a transcript that is a symlink out of
 * its directory is reported with its session and target (not as an orphan), the scan and the
 * summary stay linear on tens of thousands of entries, progress shows while scanning and per
 * batch of lines, and database copies of dead imports are removed.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { indexTopicFiles, scanJsonStores } from "../../src/import/json-store.js";
import { createProgressReporter, formatImportSummary, type ImportReport } from "../../src/import/index.js";
import { removeStaleSnapshots, scanSqliteStores } from "../../src/import/sqlite-store.js";
import type { ImportProgress } from "../../src/import/runner.js";
import type { Skip } from "../../src/import/types.js";
import { legacySqliteStore } from "../fixtures/import-support.js";
import { tempDir } from "../helpers/context.js";

const cleanups: (() => void)[] = [];
afterAll(() => {
  for (const c of cleanups) c();
});

function dir(tag: string): string {
  const d = tempDir(tag);
  cleanups.push(d.cleanup);
  return d.dir;
}

const line = (id: string) => JSON.stringify({ type: "message", id, message: { role: "user", content: id } });

function jsonStore(sessionsDir: string, entries: Record<string, unknown>, files: Record<string, string> = {}): void {
  mkdirSync(sessionsDir, { recursive: true });
  writeFileSync(join(sessionsDir, "sessions.json"), JSON.stringify(entries));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(sessionsDir, name), text);
}

function emptyReport(skipped: Skip[]): ImportReport {
  return {
    stateDir: "/x",
    dryRun: true,
    stores: { json: [], sqlite: [] },
    sessions: { found: 0, created: 0, updated: 0, unchanged: 0, keptNewer: 0, skipped: 0 },
    transcripts: {
      read: 0,
      linesWritten: 0,
      linesPresent: 0,
      linesNotImported: 0,
      linesSkipped: { unparseable: 0, not_an_entry: 0, unreadable: 0 },
    },
    skipped,
    warnings: [],
  };
}

describe("import scan: symlinks", () => {
  it("reads agent directories that are symlinks (JSON and SQLite); a dangling one is reported", async () => {
    const state = dir("oc-links");
    const elsewhere = dir("oc-other-disk");
    jsonStore(
      join(elsewhere, "main", "sessions"),
      { "agent:main:main": { sessionId: "m-1", updatedAt: 1 } },
      {
        "m-1.jsonl": `${line("a")}\n`,
      },
    );
    legacySqliteStore(join(elsewhere, "sq"), [
      { key: "agent:ops:main", sessionId: "q-1", entry: { updatedAt: 1 }, events: [line("b")] },
    ]);
    mkdirSync(join(state, "agents"), { recursive: true });
    symlinkSync(join(elsewhere, "main"), join(state, "agents", "main"));
    // legacySqliteStore writes under <dir>/agents/main/agent: link that agent dir in as "ops".
    symlinkSync(join(elsewhere, "sq", "agents", "main"), join(state, "agents", "ops"));
    symlinkSync(join(elsewhere, "unmounted"), join(state, "agents", "gone"));

    const json = await scanJsonStores(state, { defaultAgentId: "main" });
    expect(json.stores).toEqual([join(state, "agents", "main", "sessions", "sessions.json")]);
    expect(json.sessions.map((s) => [s.rawKey, s.storeAgentId])).toEqual([["agent:main:main", "main"]]);
    const lines: string[] = [];
    for await (const l of json.sessions[0]!.transcript!.lines()) lines.push(l.text!);
    expect(lines).toEqual([line("a")]);
    expect(json.skips).toEqual([
      {
        reason: "bad_agent_dir",
        source: join(state, "agents", "gone"),
        detail: `agent directory is a symlink to ${join(elsewhere, "unmounted")}, which cannot be read (ENOENT)`,
      },
    ]);

    const sqlite = await scanSqliteStores(state);
    try {
      expect(sqlite.sessions.map((s) => [s.rawKey, s.storeAgentId])).toEqual([["agent:ops:main", "ops"]]);
      // Reported once, by the JSON scan.
      expect(sqlite.skips).toEqual([]);
    } finally {
      await sqlite.close();
    }
  });

  it("a transcript linking out of its directory, or to nothing: the session is skipped, saying where to", async () => {
    const state = dir("oc-outlink");
    const outside = dir("oc-outside");
    const sessions = join(state, "agents", "main", "sessions");
    writeFileSync(join(outside, "moved.jsonl"), `${line("x")}\n`);
    jsonStore(
      sessions,
      {
        "agent:main:out": { sessionId: "s-out", updatedAt: 1 },
        "agent:main:gone": { sessionId: "s-gone", updatedAt: 1 },
        "agent:main:fine": { sessionId: "s-fine", updatedAt: 1 },
      },
      { "s-fine.jsonl": `${line("f")}\n`, "stray.jsonl": "" },
    );
    symlinkSync(join(outside, "moved.jsonl"), join(sessions, "s-out.jsonl"));
    symlinkSync(join(outside, "nothing.jsonl"), join(sessions, "s-gone.jsonl"));

    const scan = await scanJsonStores(state, { defaultAgentId: "main" });
    expect(scan.sessions.map((s) => s.rawKey)).toEqual(["agent:main:fine"]);
    const byReason = (r: string) => scan.skips.filter((s) => s.reason === r);
    expect(byReason("linked_transcript")).toEqual([
      {
        reason: "linked_transcript",
        source: join(sessions, "s-out.jsonl"),
        key: "agent:main:out",
        detail: expect.stringContaining(`symlink to ${join(outside, "moved.jsonl")}, outside ${sessions}`),
      },
      {
        reason: "linked_transcript",
        source: join(sessions, "s-gone.jsonl"),
        key: "agent:main:gone",
        detail: expect.stringContaining(`symlink to ${join(outside, "nothing.jsonl")}, which does not exist`),
      },
    ]);
    // The links belong to sessions: only the file no entry names is an orphan.
    expect(byReason("orphan_transcript").map((s) => s.source)).toEqual([join(sessions, "stray.jsonl")]);
  });
});

describe("import scan: linear on many entries", () => {
  it("indexTopicFiles: the first topic file per sessionId, in one pass over 100,000 names", () => {
    const names = ["a-topic-2.jsonl", "a-topic-10.jsonl", "a.jsonl", "b-topic-x-topic-y.jsonl", "c-topic-1.txt"];
    for (let i = 0; i < 100_000; i++) names.push(`s${i}-topic-${i % 7}.jsonl`, `s${i}.jsonl`);
    const started = Date.now();
    const index = indexTopicFiles(names);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(index.get("a")).toBe("a-topic-10.jsonl");
    // A name with `-topic-` twice is the topic file of either prefix, as a prefix test finds it.
    expect(index.get("b")).toBe("b-topic-x-topic-y.jsonl");
    expect(index.get("b-topic-x")).toBe("b-topic-x-topic-y.jsonl");
    expect(index.has("c")).toBe(false);
    expect(index.get("s12345")).toBe(`s12345-topic-${12345 % 7}.jsonl`);
    expect(index.size).toBe(100_003);
  });

  it("30,000 entries next to 30,000 unrelated transcripts scan in seconds, with progress while scanning", async () => {
    const state = dir("oc-many");
    const sessions = join(state, "agents", "main", "sessions");
    mkdirSync(sessions, { recursive: true });
    const entries: Record<string, unknown> = {};
    for (let i = 0; i < 30_000; i++) {
      entries[`agent:main:telegram:dm:${100000 + i}`] = { sessionId: `live-${i}`, updatedAt: 1 + i };
      writeFileSync(join(sessions, `old-${i}.jsonl`), "");
    }
    writeFileSync(join(sessions, "sessions.json"), JSON.stringify(entries));
    const seen: number[] = [];
    const started = Date.now();
    const scan = await scanJsonStores(state, { defaultAgentId: "main", onProgress: (n) => seen.push(n) });
    // Was 25 s: every entry looked through every file name for its topic transcript.
    expect(Date.now() - started).toBeLessThan(12_000);
    expect(scan.sessions).toHaveLength(30_000);
    expect(scan.skips.filter((s) => s.reason === "orphan_transcript")).toHaveLength(30_000);
    expect(seen).toHaveLength(30_000);
    expect(seen.at(-1)).toBe(30_000);
  }, 30_000);

  it("the summary of 60,000 skips of one reason takes well under a second", () => {
    const skipped: Skip[] = Array.from({ length: 60_000 }, (_, i) => ({
      reason: "orphan_transcript",
      source: `/s/old-${i}.jsonl`,
      detail: "no session entry refers to this transcript",
    }));
    const started = Date.now();
    const text = formatImportSummary(emptyReport(skipped));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(text).toContain("    orphan_transcript: 60000\n");
    expect(text).toContain("… and 59997 more (--json lists all)");
  });
});

describe("import progress lines (stderr piped)", () => {
  function capture(): { stream: NodeJS.WriteStream; lines: string[] } {
    const lines: string[] = [];
    const stream = {
      isTTY: false,
      write(chunk: string) {
        lines.push(...chunk.split("\n").filter(Boolean));
        return true;
      },
    } as unknown as NodeJS.WriteStream;
    return { stream, lines };
  }
  const counts = { found: 1, created: 1, updated: 0, unchanged: 0, keptNewer: 0, skipped: 0 };
  const p = (o: Partial<ImportProgress>): ImportProgress => ({
    phase: "import",
    found: 1,
    done: 0,
    total: 1,
    lines: 0,
    counts,
    ...o,
  });

  it("say how far the scan and the lines of a session in progress are, at most once per interval", () => {
    const { stream, lines } = capture();
    const r = createProgressReporter(stream, { intervalMs: 0 });
    r.update(p({ phase: "scan", found: 12_000, total: 0 }));
    r.update(p({ lines: 0 }));
    r.update(p({ lines: 1000 }));
    r.update(p({ lines: 1000 })); // nothing new: not repeated
    r.update(p({ done: 1, lines: 1500 }));
    r.stop();
    r.update(p({ done: 1, lines: 2000 })); // after stop: nothing
    expect(lines).toEqual([
      "import: reading stores: 12000 sessions found",
      "import: 0/1 sessions, 0 transcript lines (created 1, updated 0, unchanged 0)",
      "import: 0/1 sessions, 1000 transcript lines (created 1, updated 0, unchanged 0)",
      "import: 1/1 sessions, 1500 transcript lines (created 1, updated 0, unchanged 0)",
    ]);

    const slow = capture();
    const throttled = createProgressReporter(slow.stream, { intervalMs: 60_000 });
    throttled.update(p({ lines: 0 }));
    throttled.update(p({ lines: 1000 }));
    throttled.update(p({ done: 1, lines: 2000 })); // the last one always
    expect(slow.lines).toEqual([
      "import: 0/1 sessions, 0 transcript lines (created 1, updated 0, unchanged 0)",
      "import: 1/1 sessions, 2000 transcript lines (created 1, updated 0, unchanged 0)",
    ]);
  });
});

describe("database copies of imports that were killed", () => {
  it("are removed when their process is gone and they are this host's; others are left alone", async () => {
    const tmp = dir("sb-tmp");
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
    const copy = (name: string, owner?: Record<string, unknown>) => {
      mkdirSync(join(tmp, name));
      writeFileSync(join(tmp, name, "openclaw-agent.sqlite"), "x".repeat(1000));
      if (owner) writeFileSync(join(tmp, name, "owner.json"), JSON.stringify(owner));
    };
    copy(`switchboard-import-p${dead}-aaaaaa`, { pid: Number(dead), host: hostname() });
    copy(`switchboard-import-p${process.pid}-bbbbbb`, { pid: process.pid, host: hostname() });
    copy(`switchboard-import-p${dead}-cccccc`, { pid: Number(dead), host: "another-host" });
    copy(`switchboard-import-p${dead}-dddddd`); // no owner file yet: being created
    copy("switchboard-import-eeeeee"); // an older version's: no pid to judge by
    const removed = await removeStaleSnapshots(tmp);
    expect(removed).toEqual([join(tmp, `switchboard-import-p${dead}-aaaaaa`)]);
    expect(existsSync(removed[0]!)).toBe(false);
    expect(readdirSync(tmp).sort()).toEqual(
      [
        `switchboard-import-p${dead}-cccccc`,
        `switchboard-import-p${dead}-dddddd`,
        `switchboard-import-p${process.pid}-bbbbbb`,
        "switchboard-import-eeeeee",
      ].sort(),
    );
  });
});
