/**
 * sessions_list, sessions_history and session_status over HTTP: filters and clamps, the row
 * shape, reference forms (`main`, `current`, sessionId), and the sanitiser end to end on
 * transcripts written through the store (reasoning, tool-call XML, secrets, giant transcripts).
 */
import { randomUUID } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionKind } from "../../src/session/session-entry.js";
import type { TranscriptEntry, TranscriptMessage } from "../../src/history/transcript-types.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, textOf, tool, toolsConfig, type Msg } from "../fixtures/tools-support.js";

const MAIN = "agent:main:main";
const GROUP = "agent:main:tg:group:g1";
const CRON = "agent:main:cron:job-1";
const HOOK = "agent:main:hook:h1";
const NODE = "agent:main:node-abc";
const SUB = "agent:main:subagent:s1";
const OLD = "agent:main:old:1";
const MSGS = "agent:main:msgs";
const TITLED = "agent:main:titled";
const LONG = "agent:main:long";
const DIRTY = "agent:main:dirty";
const BIG = "agent:main:big";

const LONG_FIRST = "Please help me plan the quarterly budget review for the platform team next week";

let sys: TestSystem;
let mainSessionId: string;
const sessionIds = new Map<string, string>();
/** The non-tool messages of MSGS, in order. */
const msgsVisible: string[] = [];

let seq = 0;
function line(message: TranscriptMessage): TranscriptEntry {
  seq += 1;
  return { type: "message", id: `l${seq}`, timestamp: new Date().toISOString(), message };
}
const user = (text: string, extra: Partial<TranscriptMessage> = {}) => line({ role: "user", content: text, ...extra });
const assistant = (text: string) => line({ role: "assistant", content: [{ type: "text", text }] });

async function put(
  key: string,
  kind: SessionKind,
  opts: { now?: number; patch?: Record<string, unknown> } = {},
): Promise<string> {
  const sessionId = randomUUID();
  await sys.svc.sessions.upsert(
    key,
    { agentId: key.split(":")[1]!, kind },
    { sessionId, ...(opts.patch ?? {}) },
    opts.now ? { now: opts.now } : {},
  );
  sessionIds.set(key, sessionId);
  return sessionId;
}

async function write(key: string, entries: TranscriptEntry[]): Promise<void> {
  await sys.svc.transcripts.append(key.split(":")[1]!, sessionIds.get(key)!, entries);
}

const list = async (args: Record<string, unknown>, caller = MAIN) => await tool(sys, "sessions_list", caller, args);
const keysOf = (r: { sessions: { key: string }[] }) => r.sessions.map((s) => s.key);
const history = async (args: Record<string, unknown>, caller = MAIN) =>
  await tool(sys, "sessions_history", caller, args);

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      tools: { sessions: { visibility: "agent" } },
      agents: {
        list: [
          scriptAgent("main", [{ reply: "echo: {{text}}", usage: { input: 10, output: 5 } }], { default: true }),
          { id: "bulk" },
        ],
      },
    }),
  );
  // A real conversation: the main session (DM on tg) and a group.
  const first = await chat(sys, "main", "42", "hello there");
  mainSessionId = first.sessionId;
  await chat(sys, "main", "42", "second message");
  const g = await sys.post("/v1/inbound", {
    channel: "tg",
    chatType: "group",
    from: "7",
    groupId: "g1",
    groupSubject: "Team Room",
    text: "hi group",
  });
  await sys.rpc("agent.wait", { runId: g.body.runId, timeoutMs: 10_000 });

  await put(CRON, "cron");
  await put(HOOK, "hook");
  await put(NODE, "node");
  await put(SUB, "other", { patch: { spawnedBy: MAIN } });
  await put(OLD, "other", { now: Date.now() - 3 * 3600_000 });

  // 10 rounds of user → tool call → tool result → answer: 40 messages, 30 of them not tools.
  await put(MSGS, "other");
  const msgs: TranscriptEntry[] = [];
  for (let i = 0; i < 10; i++) {
    msgs.push(user(`question ${i}`));
    msgs.push(
      line({ role: "assistant", content: [{ type: "toolCall", id: `c${i}`, name: "lookup", arguments: { i } }] }),
    );
    msgs.push(
      line({
        role: "toolResult",
        toolCallId: `c${i}`,
        toolName: "lookup",
        content: [{ type: "text", text: `result ${i}` }],
      }),
    );
    msgs.push(assistant(`answer ${i}`));
    msgsVisible.push(`question ${i}`, "lookup", `answer ${i}`);
  }
  await write(MSGS, msgs);

  // Title: an inter-session message first (skipped), then the person's first message.
  await put(TITLED, "other");
  await write(TITLED, [
    user("message from another session", {
      provenance: { kind: "inter_session", sourceSessionKey: MAIN, sourceTool: "sessions_send" },
    }),
    user(LONG_FIRST),
    assistant("sure"),
    user("and a follow-up"),
  ]);

  // A long conversation: the first user message is far before the last 1000 lines.
  await put(LONG, "other");
  const longLines = [user("Original topic of this conversation")];
  for (let i = 0; i < 1100; i++) longLines.push(i % 2 ? assistant(`a${i}`) : user(`u${i}`));
  await write(LONG, longLines);

  // 205 sessions of another agent, for the limit clamp.
  const bulkKeys = Array.from({ length: 205 }, (_, i) => `agent:bulk:s${i}`);
  for (let i = 0; i < bulkKeys.length; i += 50)
    await Promise.all(bulkKeys.slice(i, i + 50).map((k) => put(k, "other")));
}, 60_000);

afterAll(async () => {
  await sys?.close();
});

describe("sessions_list", () => {
  it("row fields: display key `main`, kind, channel, ids, tokens, existing transcript, delivery context", async () => {
    const r = await list({});
    const row = r.sessions.find((s: { key: string }) => s.key === "main");
    expect(row).toMatchObject({
      key: "main",
      kind: "main",
      channel: "tg",
      sessionId: mainSessionId,
      totalTokens: 30, // two turns of 10 in + 5 out
      deliveryContext: { channel: "tg", to: "42" },
      lastChannel: "tg",
      lastTo: "42",
      systemSent: true,
      abortedLastRun: false,
    });
    expect(typeof row.updatedAt).toBe("number");
    expect(row.updatedAt).toBeLessThanOrEqual(Date.now());
    expect(row.transcriptPath).toBe(
      join(sys.config.storage.dir, "agents", "main", "sessions", `${mainSessionId}.jsonl`),
    );
    expect(existsSync(row.transcriptPath)).toBe(true);
    expect(r.sessions.some((s: { key: string }) => s.key === MAIN)).toBe(false);
    // Newest first.
    const times = r.sessions.map((s: { updatedAt: number }) => s.updatedAt);
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // `main` is the agent's main session for every caller of that agent; other keys stay as stored.
    expect(keysOf(await list({ search: "agent:main:main" }, GROUP))).toEqual(["main"]);
    expect(keysOf(await list({ search: "tg:group:g1" }))).toEqual([GROUP]);
  });

  it("kinds and channels are classified from the keys", async () => {
    const r = await list({});
    const byKey = new Map<string, { kind: string; channel: string }>(
      r.sessions.map((s: { key: string; kind: string; channel: string }) => [s.key, s]),
    );
    expect(byKey.get(GROUP)).toMatchObject({ kind: "group", channel: "tg" });
    expect(byKey.get(CRON)).toMatchObject({ kind: "cron", channel: "internal" });
    expect(byKey.get(HOOK)).toMatchObject({ kind: "hook", channel: "internal" });
    expect(byKey.get(NODE)).toMatchObject({ kind: "node", channel: "internal" });
    expect(byKey.get(SUB)).toMatchObject({ kind: "other", channel: "unknown" });
  });

  it("kinds filter (case-insensitive, unknown values ignored)", async () => {
    expect(keysOf(await list({ kinds: ["group"] }))).toEqual([GROUP]);
    expect(keysOf(await list({ kinds: ["cron", "hook"] })).sort()).toEqual([CRON, HOOK].sort());
    expect(keysOf(await list({ kinds: ["MAIN"] }))).toEqual(["main"]);
    expect((await list({ kinds: ["bogus"] })).count).toBe((await list({})).count);
  });

  it("limit is clamped to 200", async () => {
    expect((await list({ limit: 7 }, "agent:bulk:s0")).count).toBe(7);
    expect((await list({ limit: 500 }, "agent:bulk:s0")).count).toBe(200);
    expect((await list({}, "agent:bulk:s0")).count).toBe(200);
    expect((await list({ limit: 2.9 })).count).toBe(2); // floored
    expect(await list({ limit: 0 })).toMatchObject({ status: "error" });
  });

  it("activeMinutes leaves out sessions idle for longer", async () => {
    expect(keysOf(await list({}))).toContain(OLD);
    const recent = keysOf(await list({ activeMinutes: 60 }));
    expect(recent).not.toContain(OLD);
    expect(recent).toContain("main");
    expect(keysOf(await list({ activeMinutes: 240 }))).toContain(OLD);
  });

  it("label, agentId and search filters", async () => {
    await sys.rpc("sessions.patch", { key: GROUP, label: "project-x" });
    expect(keysOf(await list({ label: "project-x" }))).toEqual([GROUP]);
    expect(keysOf(await list({ label: "nope" }))).toEqual([]);
    expect((await list({ agentId: "main" })).count).toBe((await list({})).count);
    expect((await list({ agentId: "bulk" })).count).toBe(0); // visibility agent: never another agent
    expect(keysOf(await list({ search: "JOB-1" }))).toEqual([CRON]);
    expect(keysOf(await list({ search: "team room" }))).toEqual([GROUP]); // displayName
    expect(keysOf(await list({ search: sessionIds.get(HOOK)!.slice(0, 13) }))).toEqual([HOOK]);
  });

  it("messageLimit: the last N messages, tool results left out, at most 20", async () => {
    const five = (await list({ search: "msgs", messageLimit: 5 })).sessions[0];
    expect(five.messages.map((m: Msg) => textOf(m))).toEqual(msgsVisible.slice(-5));
    const many = (await list({ search: "msgs", messageLimit: 50 })).sessions[0];
    expect(many.messages).toHaveLength(20);
    expect(many.messages.map((m: Msg) => textOf(m))).toEqual(msgsVisible.slice(-20));
    expect(many.messages.some((m: Msg) => m.role === "toolResult")).toBe(false);
    const none = (await list({ search: "msgs" })).sessions[0];
    expect(none.messages).toBeUndefined();
  });

  it("includeDerivedTitles: first user message (60 chars, cut at a word, …), else name, else id and date", async () => {
    const r = await list({ includeDerivedTitles: true });
    const title = (k: string) => r.sessions.find((s: { key: string }) => s.key === k)?.title;
    const t = title(TITLED) as string;
    expect(t).toBe("Please help me plan the quarterly budget review for the…");
    expect(t.length).toBeLessThanOrEqual(61);
    expect(LONG_FIRST.startsWith(t.slice(0, -1))).toBe(true);
    expect(title("main")).toBe("hello there");
    expect(title(GROUP)).toBe("Team Room"); // displayName wins
    const hook = r.sessions.find((s: { key: string }) => s.key === HOOK);
    expect(hook.title).toBe(
      `${sessionIds.get(HOOK)!.slice(0, 8)} (${new Date(hook.updatedAt).toISOString().slice(0, 10)})`,
    );
    // Without the flag no title is derived from transcripts.
    expect((await list({ search: "titled" })).sessions[0].title).not.toBe(t);
  });

  it("includeDerivedTitles reads the beginning of a long transcript, not its last lines", async () => {
    const r = await list({ search: "long", includeDerivedTitles: true });
    expect(r.sessions[0].title).toBe("Original topic of this conversation");
  });

  it("includeLastMessage: a preview of the last non-tool message", async () => {
    const r = await list({ includeLastMessage: true });
    const row = (k: string) => r.sessions.find((s: { key: string }) => s.key === k);
    expect(row("main").lastMessage).toBe("echo: second message");
    expect(row(MSGS).lastMessage).toBe("answer 9");
    expect(row(TITLED).lastMessage).toBe("and a follow-up");
    expect(row(CRON).lastMessage).toBeUndefined();
  });
});

describe("sessions_history", () => {
  it("by key, `main`, `current` and sessionId: the same transcript", async () => {
    const byKey = await history({ sessionKey: MAIN });
    expect(byKey.sessionKey).toBe("main");
    expect(byKey.messages.map((m: Msg) => [m.role, textOf(m)])).toEqual([
      ["user", "hello there"],
      ["assistant", "echo: hello there"],
      ["user", "second message"],
      ["assistant", "echo: second message"],
    ]);
    expect(byKey).toMatchObject({ droppedMessages: false, contentTruncated: false, contentRedacted: false });
    for (const ref of ["main", "current", mainSessionId])
      expect((await history({ sessionKey: ref })).messages).toEqual(byKey.messages);
    // From another session, `current` is that session and `main` still the agent's main.
    expect((await history({ sessionKey: "main" }, GROUP)).messages).toEqual(byKey.messages);
    expect((await history({ sessionKey: "current" }, GROUP)).sessionKey).toBe(GROUP);
    expect(await history({ sessionKey: "agent:main:nothing-here" })).toMatchObject({ messages: [] });
  });

  it("limit keeps the newest messages", async () => {
    const r = await history({ sessionKey: MAIN, limit: 1 });
    expect(r.messages.map(textOf)).toEqual(["echo: second message"]);
    // The last 4 lines, then the tool result left out.
    expect((await history({ sessionKey: MSGS, limit: 4 })).messages.map(textOf)).toEqual([
      "question 9",
      "lookup",
      "answer 9",
    ]);
  });

  it("includeTools keeps tool results; by default they are left out", async () => {
    const without = await history({ sessionKey: MSGS });
    expect(without.messages).toHaveLength(30);
    expect(without.messages.some((m: Msg) => m.role === "toolResult")).toBe(false);
    const withTools = await history({ sessionKey: MSGS, includeTools: true });
    expect(withTools.messages).toHaveLength(40);
    expect(withTools.messages.filter((m: Msg) => m.role === "toolResult").map(textOf)).toEqual(
      Array.from({ length: 10 }, (_, i) => `result ${i}`),
    );
  });

  it("sanitises: reasoning and tool-call XML stripped, secrets masked, long text cut, flags set", async () => {
    await put(DIRTY, "other");
    const secret = "sk-1234567890abcdef1234";
    await write(DIRTY, [
      user(`my key is ${secret}`),
      assistant(
        `<think>private plan: leak ${secret}</think>The answer is 42.` +
          `<tool_call>{"name":"exec","arguments":{"cmd":"ls"}}</tool_call>`,
      ),
      line({ role: "assistant", content: [{ type: "text", text: "done" }], usage: { input: 1, output: 2 } }),
      assistant("y".repeat(5000)),
      assistant("NO_REPLY"),
    ]);
    const r = await history({ sessionKey: DIRTY });
    const texts = r.messages.map(textOf);
    const all = JSON.stringify(r.messages);
    expect(all).not.toContain(secret);
    expect(all).not.toContain("private plan");
    expect(all).not.toContain("<think>");
    expect(all).not.toContain("tool_call");
    expect(texts[0]).toBe("my key is sk-123…1234");
    expect(texts[1]).toBe("The answer is 42.");
    expect(r.messages[2].usage).toBeUndefined();
    expect(texts[3]).toBe(`${"y".repeat(4000)}\n…(truncated)…`);
    expect(r.messages).toHaveLength(4); // the silent NO_REPLY answer is not history
    expect(r).toMatchObject({ contentRedacted: true, contentTruncated: true, truncated: true, droppedMessages: false });
    expect(r.bytes).toBe(Buffer.byteLength(JSON.stringify(r.messages)));
    // The operators' view (chat.history) is untouched.
    const raw = (await sys.rpc("chat.history", { sessionKey: DIRTY })).messages as Msg[];
    expect(textOf(raw[0]!)).toContain(secret);
  });

  it("sessions_list messageLimit rows: sessions_history's exact sanitising, redaction, truncation, flags", async () => {
    const key = "agent:main:dirtylist";
    await put(key, "other");
    const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    await write(key, [
      user(`token ${secret}`),
      assistant(`<think>keep ${secret} to myself</think>Stored it.`),
      assistant("z".repeat(4500)),
    ]);
    const listed = await list({ search: "dirtylist", messageLimit: 3 });
    const row = listed.sessions.find((r: { key: string }) => r.key === key);
    const hist = await history({ sessionKey: key, limit: 3 });
    expect(JSON.stringify(row.messages)).not.toContain(secret);
    expect(JSON.stringify(row.messages)).not.toContain("<think>");
    expect(row.messages).toEqual(hist.messages);
    for (const flag of ["truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes"])
      expect(row[flag], flag).toEqual(hist[flag]);
    expect(row).toMatchObject({ contentRedacted: true, contentTruncated: true });
    const preview = await list({ search: "dirtylist", includeLastMessage: true });
    expect(preview.sessions[0].lastMessage.length).toBeLessThanOrEqual(240);
  });

  it("caps a huge transcript at 80 KB, newest kept, and reads only its tail (fast)", async () => {
    await put(BIG, "other");
    const pad = "x".repeat(2000);
    const lines: TranscriptEntry[] = [];
    for (let i = 0; i < 3000; i++) lines.push(i % 2 ? assistant(`m${i} ${pad}`) : user(`m${i} ${pad}`));
    await write(BIG, lines);
    const t0 = performance.now();
    const r = await history({ sessionKey: BIG });
    const ms = performance.now() - t0;
    expect(r.droppedMessages).toBe(true);
    expect(r.truncated).toBe(true);
    expect(r.bytes).toBeLessThanOrEqual(80 * 1024);
    expect(r.bytes).toBe(Buffer.byteLength(JSON.stringify(r.messages)));
    expect(r.messages.length).toBeGreaterThan(10);
    const ids = r.messages.map((m: Msg) => Number(/^m(\d+) /.exec(textOf(m))![1]));
    expect(ids.at(-1)).toBe(2999);
    // a contiguous newest tail
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => 3000 - ids.length + i));
    expect(ms).toBeLessThan(1000);
    // The largest limit is still capped by bytes.
    const max = await history({ sessionKey: BIG, limit: 100_000 });
    expect(max.bytes).toBeLessThanOrEqual(80 * 1024);
    expect(textOf(max.messages.at(-1))).toMatch(/^m2999 /);
  });

  it("reads only the tail: 1 GiB of old bytes before the last lines cost nothing", async () => {
    // Written directly (not through the store): a header, a sparse 1 GiB hole, then 300 lines.
    const key = "agent:main:huge";
    const sessionId = await put(key, "other");
    const file = sys.svc.transcripts.path("main", sessionId);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      `${JSON.stringify({ type: "session", version: 3, id: sessionId, timestamp: new Date().toISOString() })}\n`,
    );
    truncateSync(file, 1024 ** 3);
    const tail = Array.from({ length: 300 }, (_, i) => JSON.stringify(i % 2 ? assistant(`t${i}`) : user(`t${i}`))).join(
      "\n",
    );
    appendFileSync(file, `\n${tail}\n`);
    const t0 = performance.now();
    let r: any;
    let listed: any;
    try {
      r = await history({ sessionKey: key, limit: 50 });
      listed = await list({ search: "huge", messageLimit: 3, includeLastMessage: true, includeDerivedTitles: true });
    } finally {
      rmSync(file, { force: true }); // do not leave a 1 GiB (sparse) file behind
    }
    const ms = performance.now() - t0;
    expect(r.messages.map(textOf)).toEqual(Array.from({ length: 50 }, (_, i) => `t${250 + i}`));
    expect(listed.sessions[0].messages.map(textOf)).toEqual(["t297", "t298", "t299"]);
    expect(listed.sessions[0].lastMessage).toBe("t299");
    expect(listed.sessions[0].title).toBe(
      `${sessionId.slice(0, 8)} (${new Date(listed.sessions[0].updatedAt).toISOString().slice(0, 10)})`,
    ); // no user line in its head
    expect(ms).toBeLessThan(500);
  });
});

describe("session_status", () => {
  it("shows the status card of the caller by default and of a visible session by key", async () => {
    const own = await tool(sys, "session_status", MAIN, {});
    expect(own.status).toBe("ok");
    expect(own.text).toContain("🧠 Model: default");
    expect(own.text).toContain(`${MAIN} (${mainSessionId})`);
    expect(own.text).toContain("📊 Tokens: 30");
    expect(own.details).toMatchObject({ ok: true, sessionKey: "main", changedModel: false, statusText: own.text });
    const other = await tool(sys, "session_status", MAIN, { sessionKey: GROUP });
    expect(other.details.sessionKey).toBe(GROUP);
    expect(other.text).toContain(GROUP);
    expect(await tool(sys, "session_status", MAIN, { sessionKey: "agent:main:nope" })).toMatchObject({
      status: "error",
      error: "Unknown sessionKey: agent:main:nope",
    });
  });

  it('model sets the override (without counting as activity); "default" clears it', async () => {
    const before = (await sys.rpc("sessions.resolve", { key: GROUP })).entry;
    const set = await tool(sys, "session_status", MAIN, { sessionKey: GROUP, model: "gpt-test" });
    expect(set.details).toMatchObject({ changedModel: true, model: "gpt-test" });
    expect(set.text).toContain("🧠 Model: gpt-test");
    const mid = (await sys.rpc("sessions.resolve", { key: GROUP })).entry;
    expect(mid.modelOverride).toBe("gpt-test");
    expect(mid.updatedAt).toBe(before.updatedAt);
    expect((await list({ kinds: ["group"] })).sessions[0].model).toBe("gpt-test");
    const cleared = await tool(sys, "session_status", MAIN, { sessionKey: GROUP, model: "default" });
    expect(cleared.details).toMatchObject({ changedModel: true, model: null });
    expect(cleared.text).toContain("🧠 Model: default");
    expect((await sys.rpc("sessions.resolve", { key: GROUP })).entry.modelOverride).toBeUndefined();
  });
});
