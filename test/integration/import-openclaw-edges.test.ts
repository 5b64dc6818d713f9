/**
 * `switchboard import openclaw` on small hand-made state dirs, for what the generated 5,000-session
 * state does not hold: a SQLite store from before OpenClaw 2026.9.6 (no `event_zstd` column), a
 * line whose timestamp no date can hold (and `switchboard history` on it), credentials in imported
 * lines (also in Pi's bashExecution/summary messages, tool-result details and the compaction,
 * branch_summary, custom_message and custom lines that are not messages), and transcripts that
 * are symlinks out of the state dir.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { historyCommand, UNKNOWN_TIME } from "../../src/cli/commands/history.js";
import type { Config } from "../../src/config/index.js";
import { sanitizeHistory, TRUNCATION_SUFFIX } from "../../src/history/index.js";
import { importOpenClaw, type ImportTargets } from "../../src/import/index.js";
import { transcriptPath } from "../../src/transcript/index.js";
import { importTargets, legacySqliteStore } from "../fixtures/import-support.js";
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

function fresh(): { config: Config; targets: ImportTargets; stateDir: string } {
  const config = testConfig();
  const state = tempDir("oc-edges");
  cleanups.push(state.cleanup);
  const targets = importTargets(redis, config);
  return { config, targets, stateDir: state.dir };
}

const line = (id: string, content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    type: "message",
    id,
    timestamp: "2026-01-01T00:00:00.000Z",
    message: { role: "user", content },
    ...extra,
  });

function storedLines(config: Config, sessionId: string): { id?: string; message?: { content: unknown } }[] {
  return readFileSync(transcriptPath(config.storage.dir, "main", sessionId), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

describe("import openclaw: edges", () => {
  it("reads a SQLite store from before event_zstd existed", async () => {
    const { config, targets, stateDir } = fresh();
    legacySqliteStore(stateDir, [
      {
        key: "agent:main:main",
        sessionId: "s-old-1",
        entry: { updatedAt: Date.now() },
        events: [1, 2, 3].map((i) => line(`m${i}`, `hello ${i}`)),
      },
    ]);
    const report = await importOpenClaw(targets, { stateDir });
    expect(report.transcripts.linesWritten).toBe(3);
    expect(report.skipped.filter((s) => s.reason === "unreadable_transcript")).toEqual([]);
    expect(storedLines(config, "s-old-1").filter((l) => l.id?.startsWith("m"))).toHaveLength(3);
  });

  it("an impossible timestamp gets the epoch; credentials are masked; symlinks out are not read", async () => {
    const { config, targets, stateDir } = fresh();
    const dir = join(stateDir, "agents", "main", "sessions");
    mkdirSync(dir, { recursive: true });
    const secret = "sk-proj-Abcdefghijklmnop1234567890x5jK0";
    writeFileSync(
      join(dir, "s-k.jsonl"),
      [
        JSON.stringify({ type: "message", id: "bad-ts", message: { role: "user", content: "when?", timestamp: 1e20 } }),
        line("with-key", `OPENAI_API_KEY=${secret}`),
      ].join("\n"),
    );
    // Transcripts outside the state dir, reached through symlinks inside it.
    const outside = tempDir("oc-outside");
    cleanups.push(outside.cleanup);
    writeFileSync(join(outside.dir, "other.jsonl"), line("outside", "not yours"));
    symlinkSync(join(outside.dir, "other.jsonl"), join(dir, "evil.jsonl"));
    symlinkSync(join(outside.dir, "other.jsonl"), join(dir, "s-two.jsonl"));
    writeFileSync(
      join(dir, "sessions.json"),
      JSON.stringify({
        "agent:main:main": { sessionId: "s-k", updatedAt: Date.now() },
        "agent:main:evil": { sessionId: "s-evil", updatedAt: Date.now(), sessionFile: "/elsewhere/evil.jsonl" },
        "agent:main:two": { sessionId: "s-two", updatedAt: Date.now() },
      }),
    );
    const report = await importOpenClaw(targets, { stateDir });
    const lines = storedLines(config, "s-k");
    expect(lines.map((l) => l.id)).toContain("bad-ts");
    const keyLine = lines.find((l) => l.id === "with-key")!;
    expect(JSON.stringify(keyLine)).not.toContain(secret);
    expect(keyLine.message!.content).toBe("OPENAI_API_KEY=sk-pro…5jK0");
    expect(report.transcripts.linesWritten).toBe(2);
    const all = JSON.stringify(report);
    expect(all).not.toContain('"outside"');
    for (const sid of ["s-evil", "s-two"]) expect(() => storedLines(config, sid)).toThrow();
  });

  it("two sessions with one label: the second's label is dropped once, and a re-run changes nothing", async () => {
    const { targets, stateDir } = fresh();
    const dir = join(stateDir, "agents", "main", "sessions");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "sessions.json"),
      JSON.stringify({
        "agent:main:one": { sessionId: "s-one", updatedAt: 1_700_000_000_000, label: "Work" },
        "agent:main:two": { sessionId: "s-two", updatedAt: 1_700_000_000_001, label: "Work" },
      }),
    );
    const first = await importOpenClaw(targets, { stateDir });
    expect(first.sessions.created).toBe(2);
    expect(first.warnings.some((w) => w.includes('label "Work" dropped'))).toBe(true);
    const rev = (await targets.sessions.get("agent:main:two"))!.rev;
    const again = await importOpenClaw(targets, { stateDir });
    expect(again.sessions).toMatchObject({ created: 0, updated: 0, unchanged: 2 });
    expect((await targets.sessions.get("agent:main:two"))!.rev).toBe(rev);
  });

  it("secrets in bashExecution, summaries, tool-result details: masked on import and in sessions_history", async () => {
    const { config, targets, stateDir } = fresh();
    const dir = join(stateDir, "agents", "main", "sessions");
    mkdirSync(dir, { recursive: true });
    const sk = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX";
    const ghp = "ghp_abcdefghijklmnopqrstuvwxyz0123";
    const aws = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY";
    const secrets = [sk, "hunter2hunter2", ghp, aws];
    const at = "2026-01-01T00:00:00.000Z";
    const msg = (id: string, message: Record<string, unknown>) =>
      JSON.stringify({ type: "message", id, parentId: null, timestamp: at, message });
    writeFileSync(
      join(dir, "s-bash.jsonl"),
      [
        msg("b1", {
          role: "bashExecution",
          command: `export OPENAI_API_KEY=${sk} && cat .env`,
          output: `DB_PASSWORD=hunter2hunter2\nGITHUB_TOKEN=${ghp}\n${"x".repeat(10_000)}`,
          exitCode: 0,
          cancelled: false,
          truncated: false,
          timestamp: 2,
        }),
        msg("b2", {
          role: "compactionSummary",
          summary: `AWS_SECRET_ACCESS_KEY=${aws}`,
          tokensBefore: 9,
          timestamp: 3,
        }),
        msg("b3", { role: "branchSummary", summary: `the user pasted ${sk}`, fromId: "b1", timestamp: 4 }),
        msg("b4", {
          role: "toolResult",
          toolCallId: "call_1",
          toolName: "exec",
          content: [{ type: "text", text: "ok" }],
          details: { stdout: `GITHUB_TOKEN=${ghp}`, env: { password: "hunter2hunter2" } },
          isError: false,
          timestamp: 5,
        }),
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "sessions.json"),
      JSON.stringify({ "agent:main:main": { sessionId: "s-bash", updatedAt: 1 } }),
    );
    const report = await importOpenClaw(targets, { stateDir });
    expect(report.transcripts.linesWritten).toBe(4);
    const stored = readFileSync(transcriptPath(config.storage.dir, "main", "s-bash"), "utf8");
    for (const secret of secrets) expect(stored).not.toContain(secret);
    const lines = storedLines(config, "s-bash") as { message?: Record<string, unknown> }[];
    const bash = lines.find((l) => l.message?.role === "bashExecution")!.message!;
    expect(bash.command).toBe("export OPENAI_API_KEY=sk-pro…UVWX && cat .env");
    expect(bash).toMatchObject({ exitCode: 0, cancelled: false, truncated: false, timestamp: 2 });

    // sessions_history over what is stored: masked (again, idempotently) and cut to 4 000 characters.
    const history = sanitizeHistory(await targets.transcripts.messages("main", "s-bash", 200), { includeTools: true });
    const shown = JSON.stringify(history.messages);
    for (const secret of secrets) expect(shown).not.toContain(secret);
    const shownBash = history.messages.find((m) => m.role === "bashExecution")!;
    expect((shownBash.output as string).endsWith(TRUNCATION_SUFFIX)).toBe(true);
    expect((shownBash.output as string).length).toBeLessThanOrEqual(4000 + TRUNCATION_SUFFIX.length);
    expect(history.contentTruncated).toBe(true);
  });

  it("secrets in lines that are not messages (compaction, branch_summary, custom…): masked on import", async () => {
    const { config, targets, stateDir } = fresh();
    const dir = join(stateDir, "agents", "main", "sessions");
    mkdirSync(dir, { recursive: true });
    const secrets = [
      "sk-proj-COMPACTSECRET1234567890",
      "hunter2hunter2",
      "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
      "abcdefghijklmnopqrstuvwxyz0123456",
      "sk-proj-CUSTOMDATA1234567890abc",
      "Sup3rS3cretPassw0rd",
      "sk-proj-IMPORTSECRET1234567890",
    ];
    const at = "2026-01-01T00:00:00.000Z";
    const entry = (type: string, id: string, fields: Record<string, unknown>) =>
      JSON.stringify({ type, id, parentId: null, timestamp: at, ...fields });
    writeFileSync(
      join(dir, "abc12345-0000-0000-0000-000000000001.jsonl"),
      [
        JSON.stringify({ type: "session", version: 3, id: "abc12345-0000-0000-0000-000000000001", timestamp: at }),
        line("u1", `OPENAI_API_KEY=${secrets[6]}`),
        entry("compaction", "c1", {
          summary: `User shared OPENAI_API_KEY=${secrets[0]} and db password: ${secrets[1]}`,
          firstKeptEntryId: "u1",
          tokensBefore: 5000,
          details: { db: `postgres://admin:${secrets[5]}@db.internal:5432/prod` },
        }),
        entry("branch_summary", "b1", { fromId: "c1", summary: `the token was ${secrets[2]}` }),
        entry("custom_message", "cm1", {
          customType: "note",
          content: `Authorization: Bearer ${secrets[3]}`,
          display: true,
        }),
        entry("custom", "cu1", { customType: "ext.state", data: { apiKey: secrets[4] } }),
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "sessions.json"),
      JSON.stringify({ "agent:main:main": { sessionId: "abc12345-0000-0000-0000-000000000001", updatedAt: 1 } }),
    );
    const report = await importOpenClaw(targets, { stateDir });
    expect(report.transcripts.linesWritten).toBe(5);
    const stored = readFileSync(
      transcriptPath(config.storage.dir, "main", "abc12345-0000-0000-0000-000000000001"),
      "utf8",
    );
    for (const secret of secrets) expect(stored).not.toContain(secret);
    const byId = new Map(
      stored
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .map((e) => [e.id, e]),
    );
    expect(byId.get("c1")).toMatchObject({
      type: "compaction",
      summary: "User shared OPENAI_API_KEY=sk-pro…7890 and db password: ***",
      firstKeptEntryId: "u1",
      tokensBefore: 5000,
      details: { db: "postgres://admin:Sup3rS…w0rd@db.internal:5432/prod" },
    });
    expect(byId.get("b1")).toMatchObject({ fromId: "c1", summary: "the token was ghp_ab…6789" });
    expect(byId.get("cm1")).toMatchObject({ customType: "note", content: "Authorization: Bearer abcdef…3456" });
    expect(byId.get("cu1")).toMatchObject({ customType: "ext.state", data: { apiKey: "sk-pro…0abc" } });
  });

  it("`switchboard history`: a message time no Date can hold, or none, falls back to the line's", async () => {
    const { config, targets, stateDir } = fresh();
    const dir = join(stateDir, "agents", "main", "sessions");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "s-ts.jsonl"),
      [
        JSON.stringify({ type: "message", id: "t1", message: { role: "user", content: "hello", timestamp: 1 } }),
        JSON.stringify({
          type: "message",
          id: "t2",
          timestamp: "2026-02-03T04:05:06.000Z",
          message: { role: "assistant", content: [{ type: "text", text: "hi" }], timestamp: 1e20 },
        }),
        JSON.stringify({
          type: "message",
          id: "t3",
          timestamp: "2026-02-03T04:05:07.000Z",
          message: { role: "user", content: "no time of its own" },
        }),
        JSON.stringify({
          type: "message",
          id: "t4",
          timestamp: "not a date",
          message: { role: "user", content: "lost" },
        }),
        // No time anywhere in the line: the import gives the line the epoch.
        JSON.stringify({ type: "message", id: "t5", message: { role: "assistant", content: "late", timestamp: 1e20 } }),
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "sessions.json"),
      JSON.stringify({ "agent:main:main": { sessionId: "s-ts", updatedAt: 1 } }),
    );
    expect((await importOpenClaw(targets, { stateDir })).transcripts.linesWritten).toBe(5);

    const configFile = join(stateDir, "switchboard.json");
    writeFileSync(configFile, JSON.stringify({ redis: config.redis, storage: { dir: config.storage.dir } }));
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    let code: number;
    try {
      code = await historyCommand("main", { config: configFile });
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(0);
    expect(written.join("")).toBe(
      [
        "[1970-01-01 00:00:00] user: hello",
        "[2026-02-03 04:05:06] assistant: hi",
        "[2026-02-03 04:05:07] user: no time of its own",
        `[${UNKNOWN_TIME}] user: lost`,
        "[1970-01-01 00:00:00] assistant: late",
        "",
      ].join("\n"),
    );
  });
});
