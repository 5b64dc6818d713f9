/**
 * Reading transcripts back, end to end (review "history" findings 1, 2, 5, 6): the live writer masks
 * credentials in the lines that are not messages (the sessions_yield `custom` line) and in URLs;
 * `sessions_history` masks every field of a block of a transcript stored unmasked; `chat.history` is
 * bounded like OpenClaw's (128 KB per message, 6 MB per answer) and otherwise returns what is stored.
 */
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAT_HISTORY_OMITTED_TEXT, jsonBytes } from "../../src/history/index.js";
import { CHAT_HISTORY_MAX_BYTES } from "../../src/history/sanitize-history.js";
import type { TranscriptEntry } from "../../src/history/transcript-types.js";
import { chat, scriptAgent, tool, toolsConfig } from "../fixtures/tools-support.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

const GHP = `ghp_${"a".repeat(16)}WXYZ`; // assembled at run time: no token-shaped string in the source
const DB_PASSWORD = `Sup3rS3cret${"Passw0rd"}`;

describe("history: redaction on write and read, chat.history bounds", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        agents: {
          list: [
            scriptAgent(
              "main",
              [
                { when: { contains: "yield" }, tools: [{ name: "sessions_yield", args: { message: "{{text}}" } }] },
                { reply: "ok: {{text}}" },
              ],
              { default: true },
            ),
          ],
        },
      }),
    );
  });

  afterAll(async () => {
    await sys?.close();
  });

  async function rawLines(sessionKey: string): Promise<TranscriptEntry[]> {
    const entry = (await sys.svc.sessions.get(sessionKey))!;
    const text = await readFile(sys.svc.transcripts.path(entry.agentId, entry.sessionId), "utf8");
    return text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as TranscriptEntry);
  }

  it("the writer masks the sessions_yield line's data and a password in a URL", async () => {
    const text = `yield until db postgres://admin:${DB_PASSWORD}@db.internal:5432/prod is up, GITHUB_TOKEN=${GHP}`;
    const { sessionKey } = await chat(sys, "main", "1", text);
    const lines = await rawLines(sessionKey);
    const raw = JSON.stringify(lines);
    expect(raw).not.toContain(DB_PASSWORD);
    expect(raw).not.toContain(GHP);
    const masked = "yield until db postgres://admin:Sup3rS…w0rd@db.internal:5432/prod is up, GITHUB_TOKEN=ghp_aa…WXYZ";
    const custom = lines.find((e) => e.type === "custom")!;
    expect(custom).toMatchObject({ customType: "openclaw.sessions_yield", data: { message: masked } });
    expect(lines.find((e) => e.message?.role === "user")!.message!.content).toBe(masked);
  });

  it("sessions_history masks a tool_use input and a tool_result's nested text stored unmasked", async () => {
    const { sessionKey } = await chat(sys, "main", "2", "hello");
    const entry = (await sys.svc.sessions.get(sessionKey))!;
    const at = new Date().toISOString();
    await sys.svc.transcripts.append(entry.agentId, entry.sessionId, [
      {
        type: "message",
        id: "w1",
        timestamp: at,
        message: {
          role: "assistant",
          content: [{ type: "tool_use", id: "c10", name: "exec", input: { db_password: "hunter3hunter3hunter3" } }],
        },
      },
      {
        type: "message",
        id: "w2",
        timestamp: at,
        message: {
          role: "assistant",
          content: [
            {
              type: "tool_result",
              tool_use_id: "c10",
              content: [{ type: "text", text: "DB_PASSWORD=hunter4hunter4hunter4" }],
            },
          ],
        },
      },
    ]);
    const res = await tool(sys, "sessions_history", sessionKey, { sessionKey, includeTools: true });
    const shown = JSON.stringify(res);
    expect(shown).not.toMatch(/hunter[34]hunter/);
    expect(shown).toContain("hunter…ter3");
    expect(shown).toContain("DB_PASSWORD=hunter…ter4");
  });

  it("chat.history: a message over 128 KB is a placeholder in its place, the answer at most 6 MB", async () => {
    const { sessionKey } = await chat(sys, "main", "3", "first");
    const entry = (await sys.svc.sessions.get(sessionKey))!;
    const at = new Date().toISOString();
    const big = (i: number, bytes: number): TranscriptEntry => ({
      type: "message",
      id: `big-${i}`,
      timestamp: at,
      message: { role: "toolResult", toolCallId: `c${i}`, toolName: "exec", content: `${i} ${"x".repeat(bytes)}` },
    });
    // 200 KB (over the per-message cap), then 60 × 120 KB: 7.2 MB, over the answer's cap.
    const entries = [big(0, 200 * 1024), ...Array.from({ length: 60 }, (_, i) => big(i + 1, 120 * 1024))];
    await sys.svc.transcripts.append(entry.agentId, entry.sessionId, entries);

    const small = (await sys.rpc("chat.history", { sessionKey, limit: 63 })).messages as { content: unknown }[];
    const newest = small.at(-1)!;
    expect(newest).toEqual(entries.at(-1)!.message); // as stored
    const bytes = jsonBytes(small);
    expect(bytes).toBeLessThanOrEqual(CHAT_HISTORY_MAX_BYTES);
    expect(bytes).toBeGreaterThan(CHAT_HISTORY_MAX_BYTES - 130 * 1024); // only the oldest needed were dropped
    expect(small.length).toBeLessThan(61);

    // With fewer messages the placeholder keeps its place, between the turn and the rest.
    await sys.svc.transcripts.append(entry.agentId, entry.sessionId, [big(100, 200 * 1024)]);
    const last = (await sys.rpc("chat.history", { sessionKey, limit: 2 })).messages as Record<string, unknown>[];
    expect(last).toEqual([entries.at(-1)!.message, { role: "toolResult", content: CHAT_HISTORY_OMITTED_TEXT }]);
  });
});
