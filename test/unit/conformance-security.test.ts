/**
 * The pure pieces behind issue 10's security items: who is an owner, the hand-off sanitiser,
 * masking before a transcript write (and its opt-out), and the inter-session marker.
 */
import { describe, expect, it } from "vitest";
import { parseConfig, sanitizeForHandoff } from "../../src/index.js";
import { isCommandOwner } from "../../src/inbound/command-owner.js";
import { redactTranscriptEntries, redactValue } from "../../src/history/redact-transcript.js";
import { markInterSession, runtimePromptText } from "../../src/runtimes/inter-session.js";
import type { TranscriptEntry } from "../../src/history/transcript-types.js";

describe("isCommandOwner", () => {
  const owners = (list: (string | number)[]) => parseConfig({ commands: { ownerAllowFrom: list } });
  it("matches channel:id entries on that channel only, bare ids on any channel, case-insensitively", () => {
    const cfg = owners(["telegram:42", "Alice", 777]);
    expect(isCommandOwner(cfg, { channel: "telegram", from: "42" })).toBe(true);
    expect(isCommandOwner(cfg, { channel: "discord", from: "42" })).toBe(false);
    expect(isCommandOwner(cfg, { channel: "slack", from: "alice" })).toBe(true);
    expect(isCommandOwner(cfg, { channel: "tg", from: "777" })).toBe(true);
    expect(isCommandOwner(cfg, { channel: "tg", from: "43" })).toBe(false);
  });
  it("a wildcard never makes a sender an owner, and no list means no chat owners", () => {
    expect(isCommandOwner(owners(["*"]), { channel: "tg", from: "anyone" })).toBe(false);
    expect(isCommandOwner(owners(["tg:*"]), { channel: "tg", from: "anyone" })).toBe(false);
    expect(isCommandOwner(parseConfig({}), { channel: "tg", from: "anyone" })).toBe(false);
  });
});

describe("sanitizeForHandoff", () => {
  it("strips reasoning, tool-call XML and control tokens; keeps code; idempotent", () => {
    const raw = '<think>secret plan</think>Hello<|im_end|> there.\n<tool_call>{"name":"x"}</tool_call>';
    expect(sanitizeForHandoff(raw)).toBe("Hello there.");
    expect(sanitizeForHandoff(sanitizeForHandoff(raw))).toBe("Hello there.");
    expect(sanitizeForHandoff("use `<think>` tags")).toBe("use `<think>` tags");
    expect(sanitizeForHandoff(undefined)).toBe("");
  });
});

describe("redactTranscriptEntries", () => {
  const secret = "sk-proj-Abcdefghijklmnop1234567890x5jK0";
  const lines: TranscriptEntry[] = [
    {
      type: "message",
      id: "r:u",
      timestamp: "t",
      message: {
        role: "user",
        content: `key ${secret}`,
        provenance: { kind: "inter_session", sourceSessionKey: "agent:a:main" },
      },
    },
    {
      type: "message",
      id: "r:t0",
      timestamp: "t",
      message: {
        role: "assistant",
        content: [{ type: "toolCall", id: "c1", name: "exec", arguments: { env: `OPENAI_API_KEY=${secret}` } }],
      },
    },
    {
      type: "message",
      id: "r:a",
      timestamp: "t",
      message: { role: "assistant", content: [{ type: "text", text: "plain" }] },
    },
  ];
  it("masks secrets in words and tool arguments, leaves structure and clean lines alone", () => {
    const out = redactTranscriptEntries(lines, true);
    expect(JSON.stringify(out)).not.toContain(secret);
    expect(out[0]!.message!.content).toBe("key sk-pro…5jK0");
    expect(out[0]!.message!.provenance).toEqual(lines[0]!.message!.provenance);
    expect(out[1]!.message!.content).toEqual([
      { type: "toolCall", id: "c1", name: "exec", arguments: { env: "OPENAI_API_KEY=sk-pro…5jK0" } },
    ]);
    expect(out[2]).toBe(lines[2]);
    expect(lines[0]!.message!.content).toBe(`key ${secret}`); // input untouched
  });
  it("masks a credential by its field name in tool arguments and results, at any depth", () => {
    const bare = "Zx9qLmW2pR7tYv4bN8kC"; // no known prefix: only its field name gives it away
    const args = { apiKey: bare, nested: { name: secret, db_password: "hunter2", sessionKey: "agent:main:main" } };
    const out = redactTranscriptEntries(
      [
        {
          type: "message",
          id: "r:t1",
          timestamp: "t",
          message: { role: "assistant", content: [{ type: "toolCall", id: "c2", name: "deploy", arguments: args }] },
        },
      ],
      true,
    );
    const block = (out[0]!.message!.content as { name: string; arguments: typeof args }[])[0]!;
    expect(block.name).toBe("deploy");
    expect(block.arguments).toEqual({
      apiKey: "Zx9qLm…N8kC",
      nested: { name: "sk-pro…5jK0", db_password: "***", sessionKey: "agent:main:main" },
    });
    // A tool result is redacted as a value before it is stored as JSON text, whose escaped
    // quotes no pattern sees through.
    const result = { status: "ok", reply: `Config: {"apiKey": "${bare}", "password": "${bare}"}` };
    expect(JSON.stringify(redactValue(result))).not.toContain(bare);
  });

  it("is on by default and can be turned off with transcripts.redactSecrets: false", () => {
    expect(parseConfig({}).transcripts.redactSecrets).toBe(true);
    expect(parseConfig({ transcripts: { redactSecrets: false } }).transcripts.redactSecrets).toBe(false);
    expect(redactTranscriptEntries(lines, false)).toBe(lines);
  });
});

describe("inter-session marker", () => {
  it("marks once, with source session, channel, tool, run and isUser=false", () => {
    const p = {
      kind: "inter_session" as const,
      sourceSessionKey: "agent:a:main",
      sourceChannel: "tg",
      sourceTool: "sessions_send",
      sourceRunId: "r1",
    };
    const marked = markInterSession("hi", p);
    expect(marked).toBe(
      "[Inter-session message] sourceSession=agent:a:main sourceChannel=tg sourceTool=sessions_send " +
        "sourceRunId=r1 isUser=false\nhi",
    );
    expect(markInterSession(marked, p)).toBe(marked);
    expect(runtimePromptText({ text: "hi" })).toBe("hi");
    expect(runtimePromptText({ text: "hi", interSession: p })).toBe(marked);
  });
});
