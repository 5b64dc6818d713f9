import { describe, expect, it } from "vitest";
import {
  ANNOUNCE_SKIP,
  CHAT_HISTORY_OMITTED_TEXT,
  HISTORY_MAX_BYTES,
  NO_REPLY,
  REPLY_SKIP,
  SESSIONS_HISTORY_OMITTED_TEXT,
  TRUNCATION_SUFFIX,
  capArrayByJsonBytes,
  isAnnounceSkip,
  isNoReply,
  isReplySkip,
  isSilentToken,
  jsonBytes,
  latestAssistantText,
  sanitizeHistory,
  truncateText,
  truncateUtf16Safe,
  type SanitizeHistoryOptions,
} from "../../src/history/index.js";
import type { ContentBlock, TranscriptMessage } from "../../src/history/transcript-types.js";
import { CHAT_HISTORY_MAX_BYTES, capChatHistory } from "../../src/history/sanitize-history.js";

const SECRET = `sk-${"1234567890abcdef1234"}`; // masks to sk-123…1234
const THINK_OPEN = "<" + "think>";
const THINK_CLOSE = "</" + "think>";

const user = (content: TranscriptMessage["content"], extra: Partial<TranscriptMessage> = {}): TranscriptMessage => ({
  role: "user",
  content,
  ...extra,
});
const assistant = (
  content: TranscriptMessage["content"],
  extra: Partial<TranscriptMessage> = {},
): TranscriptMessage => ({
  role: "assistant",
  content,
  ...extra,
});
const toolResult = (text: string): TranscriptMessage => ({
  role: "toolResult",
  toolCallId: "call_1",
  toolName: "exec",
  content: [{ type: "text", text }],
});
const text = (t: string): ContentBlock => ({ type: "text", text: t });

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------

describe("truncateText / truncateUtf16Safe", () => {
  it.each([
    ["shorter than the limit", "hello", 10, "hello", false],
    ["exactly the limit", "hello", 5, "hello", false],
    ["one over the limit", "hello!", 5, `hello${TRUNCATION_SUFFIX}`, true],
    ["emoji fully before the cut", "ab😀cd", 4, `ab😀${TRUNCATION_SUFFIX}`, true],
    ["cut would split an emoji: it goes whole", "abc😀d", 4, `abc${TRUNCATION_SUFFIX}`, true],
    ["emoji at the very start, limit 1", "😀😀", 1, TRUNCATION_SUFFIX, true],
    ["empty text", "", 3, "", false],
  ])("%s", (_label, input, max, expected, truncated) => {
    expect(truncateText(input, max)).toEqual({ text: expected, truncated });
  });

  it("the suffix is the unicode-ellipsis form", () => {
    expect(TRUNCATION_SUFFIX).toBe("\n…(truncated)…");
  });

  it("never leaves a lone high surrogate at the cut", () => {
    const input = "😀".repeat(3000);
    for (const max of [1, 2, 3, 3999, 4000, 4001]) {
      const cut = truncateUtf16Safe(input, max);
      expect(cut.length).toBeLessThanOrEqual(max);
      expect(cut.length % 2).toBe(0);
      expect(() => encodeURIComponent(cut)).not.toThrow(); // throws on lone surrogates
    }
  });
});

describe("jsonBytes / capArrayByJsonBytes", () => {
  it.each([
    ["ascii string", "abc", 5],
    ["two-byte characters", "é", 4],
    ["emoji (4 UTF-8 bytes)", "😀", 6],
    ["object", { a: 1 }, 7],
    ["array", [1, 2], 5],
    ["undefined cannot be serialised", undefined, 0],
  ])("jsonBytes of %s", (_label, value, expected) => {
    expect(jsonBytes(value)).toBe(expected);
  });

  it("size is 2 + Σ item bytes + commas, equal to the array's JSON size", () => {
    const items = ["a", { b: "é" }, [1, 2, 3]];
    const result = capArrayByJsonBytes(items, 10_000);
    expect(result.items).toEqual(items);
    expect(result.bytes).toBe(jsonBytes(items));
    expect(result.bytes).toBe(2 + 3 + jsonBytes({ b: "é" }) + 7 + 2);
  });

  it("drops the oldest items first", () => {
    const items = ["0123456789", "abcdefghij", "ABCDEFGHIJ"]; // 12 bytes each
    const result = capArrayByJsonBytes(items, 2 + 12 + 1 + 12);
    expect(result.items).toEqual(["abcdefghij", "ABCDEFGHIJ"]);
    expect(result.bytes).toBe(27);
  });

  it("keeps the last item even when it alone is too big", () => {
    const result = capArrayByJsonBytes(["a", "b", "x".repeat(100)], 10);
    expect(result.items).toEqual(["x".repeat(100)]);
    expect(result.bytes).toBe(104);
  });

  it("an empty array is 2 bytes", () => {
    expect(capArrayByJsonBytes([], 0)).toEqual({ items: [], bytes: 2 });
  });

  it("does not modify its input", () => {
    const items = deepFreeze(["1", "2", "3"]);
    expect(capArrayByJsonBytes(items, 5).items).toEqual(["3"]);
    expect(items).toEqual(["1", "2", "3"]);
  });
});

describe("silent tokens and reply extraction", () => {
  it("exports the three tokens", () => {
    expect([REPLY_SKIP, ANNOUNCE_SKIP, NO_REPLY]).toEqual(["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY"]);
  });

  it.each([
    ["NO_REPLY", NO_REPLY, true],
    ["  NO_REPLY\n", NO_REPLY, true],
    ["no_reply", NO_REPLY, true],
    ["NO_REPLY.", NO_REPLY, false],
    ["NO_REPLY, thanks", NO_REPLY, false],
    ["REPLY_SKIP", REPLY_SKIP, true],
    ["reply_skip ", REPLY_SKIP, true],
    ["REPLY_SKIP please", REPLY_SKIP, false],
    ["ANNOUNCE_SKIP", ANNOUNCE_SKIP, true],
    ["ANNOUNCE_SKIP", REPLY_SKIP, false],
    ["", NO_REPLY, false],
  ])("isSilentToken(%j, %s) = %s", (input, token, expected) => {
    expect(isSilentToken(input, token)).toBe(expected);
  });

  it("helpers match their own token only; non-strings are never silent", () => {
    expect([isReplySkip("REPLY_SKIP"), isAnnounceSkip("ANNOUNCE_SKIP"), isNoReply("NO_REPLY")]).toEqual([
      true,
      true,
      true,
    ]);
    expect([isReplySkip("NO_REPLY"), isAnnounceSkip("REPLY_SKIP"), isNoReply("ANNOUNCE_SKIP")]).toEqual([
      false,
      false,
      false,
    ]);
    expect(isSilentToken(undefined, NO_REPLY)).toBe(false);
    expect(isSilentToken(42, NO_REPLY)).toBe(false);
  });

  it.each<[string, TranscriptMessage[], string | undefined]>([
    ["string content", [user("hi"), assistant("Hello!")], "Hello!"],
    ["text blocks joined without separator", [user("hi"), assistant([text("Hel"), text("lo")])], "Hello"],
    ["normalised", [user("hi"), assistant(`${THINK_OPEN}plan${THINK_CLOSE} Answer `)], "Answer"],
    ["newest assistant wins", [user("a"), assistant("first"), assistant("second")], "second"],
    [
      "tool-call-only message and tool result are stepped over",
      [
        user("hi"),
        assistant("Final answer"),
        assistant([{ type: "toolCall", id: "c1", name: "exec", arguments: {} }]),
        toolResult("out"),
      ],
      "Final answer",
    ],
    ["thinking blocks are not text", [user("q"), assistant([{ type: "thinking", thinking: "hmm" }, text("A")])], "A"],
    ["a user message ends the search", [assistant("old answer"), user("new question")], undefined],
    ["no assistant at all", [user("hi")], undefined],
    ["empty transcript", [], undefined],
    ["silent token is returned as text", [user("x"), assistant(" NO_REPLY ")], "NO_REPLY"],
  ])("latestAssistantText: %s", (_label, messages, expected) => {
    expect(latestAssistantText(messages)).toBe(expected);
  });
});

// ---------------------------------------------------------------------------------------------

describe("sanitizeHistory: selection", () => {
  const transcript: TranscriptMessage[] = [
    user("run ls"),
    assistant([{ type: "toolCall", id: "c1", name: "exec", arguments: { cmd: "ls" } }]),
    toolResult("a.txt"),
    { role: "tool", content: "legacy tool output" },
    assistant("Here: a.txt"),
  ];

  it.each<[string, SanitizeHistoryOptions | undefined, string[]]>([
    ["tools dropped by default", undefined, ["user", "assistant", "assistant"]],
    ["includeTools: false", { includeTools: false }, ["user", "assistant", "assistant"]],
    ["includeTools: true keeps them", { includeTools: true }, ["user", "assistant", "toolResult", "tool", "assistant"]],
  ])("%s", (_label, opts, roles) => {
    const result = sanitizeHistory(transcript, opts);
    expect(result.messages.map((m) => m.role)).toEqual(roles);
    // Leaving tool messages out is selection, not dropping.
    expect(result.droppedMessages).toBe(false);
    expect(result.truncated).toBe(false);
  });

  it.each<[string, TranscriptMessage, boolean]>([
    ["assistant NO_REPLY", assistant("NO_REPLY"), true],
    ["assistant no_reply with blanks", assistant("  no_reply\n"), true],
    ["assistant NO_REPLY as text blocks", assistant([text("NO_"), text("REPLY")]), true],
    ["assistant NO_REPLY after thinking", assistant([{ type: "thinking", thinking: "quiet" }, text("NO_REPLY")]), true],
    ["assistant NO_REPLY after hidden reasoning tags", assistant(`${THINK_OPEN}x${THINK_CLOSE}NO_REPLY`), true],
    [
      "assistant NO_REPLY with a tool call is kept",
      assistant([text("NO_REPLY"), { type: "toolCall", id: "1", name: "x", arguments: {} }]),
      false,
    ],
    ["assistant NO_REPLY with more words is kept", assistant("NO_REPLY because done"), false],
    ["user NO_REPLY is kept", user("NO_REPLY"), false],
    ["assistant REPLY_SKIP is kept", assistant("REPLY_SKIP"), false],
  ])("%s", (_label, message, dropped) => {
    const result = sanitizeHistory([user("before"), message]);
    expect(result.messages.length).toBe(dropped ? 1 : 2);
    expect(result.droppedMessages).toBe(false);
  });
});

describe("sanitizeHistory: per-message sanitising", () => {
  it("removes details, usage and cost (and says so in truncated)", () => {
    const result = sanitizeHistory([
      assistant("ok", {
        usage: { input: 1, output: 2 },
        cost: 0.01,
        details: { big: "x" },
        model: "m",
        stopReason: "stop",
      }),
    ]);
    expect(result.messages).toEqual([{ role: "assistant", content: "ok", model: "m", stopReason: "stop" }]);
    expect(result.truncated).toBe(true);
    expect(result.contentTruncated).toBe(false);
  });

  it("normalises assistant text but not user text", () => {
    const hidden = `${THINK_OPEN}plan${THINK_CLOSE}Answer`;
    const result = sanitizeHistory([user(hidden), assistant(hidden), assistant([text(hidden)])]);
    expect(result.messages.map((m) => m.content)).toEqual([hidden, "Answer", [text("Answer")]]);
  });

  it("redacts every text field: string content, block text, thinking, partialJson, message text", () => {
    const result = sanitizeHistory(
      [
        user(`my key is ${SECRET}`),
        assistant(
          [
            text(`use ${SECRET}`),
            { type: "thinking", thinking: `the key ${SECRET}` },
            { type: "toolCall", id: "c", name: "x", arguments: {}, partialJson: `{"k":"${SECRET}"}` },
          ],
          { text: `also ${SECRET}` },
        ),
        toolResult(`OPENAI_API_KEY=${SECRET}`),
      ],
      { includeTools: true },
    );
    const json = JSON.stringify(result.messages);
    expect(json).not.toContain(SECRET);
    expect(json.match(/sk-123…1234/g)?.length).toBe(6);
    expect(result.contentRedacted).toBe(true);
    expect(result.truncated).toBe(false);
    const a = result.messages[1];
    expect(a?.text).toBe("also sk-123…1234");
  });

  it("a reasoning block split across two text blocks stays hidden (as reply extraction sees it)", () => {
    const message = assistant([
      text(`${THINK_OPEN}The user wants X. I must not reveal `),
      text(`the codename BLUEFALCON.${THINK_CLOSE}The answer is 42.`),
      { type: "toolCall", id: "c", name: "x", arguments: {} },
      text(" Done."),
    ]);
    const result = sanitizeHistory([message]);
    const json = JSON.stringify(result.messages);
    expect(json).not.toContain("BLUEFALCON");
    expect(json).not.toContain("The user wants");
    expect(result.messages[0]?.content).toEqual([
      text(""),
      text("The answer is 42."),
      { type: "toolCall", id: "c", name: "x", arguments: {} },
      text(" Done."),
    ]);
    expect(latestAssistantText([message])).toBe("The answer is 42. Done.");
    // Three blocks, the middle one entirely reasoning; a later block with no tags is visible again.
    const three = sanitizeHistory([
      assistant([text(`A ${THINK_OPEN}one`), text("two"), text(`three${THINK_CLOSE} B`)]),
    ]);
    expect(three.messages[0]?.content).toEqual([text("A"), text(""), text("B")]);
    // Unterminated in the last block: nothing after it to carry into, the next message starts afresh.
    const next = sanitizeHistory([assistant([text(`x ${THINK_OPEN}secret plan`)]), assistant([text("visible")])]);
    expect(next.messages.map((m) => m.content)).toEqual([[text("x")], [text("visible")]]);
  });

  it("redacts and cuts Pi's bashExecution command/output and compaction/branch summaries", () => {
    const long = `DB_PASSWORD=hunter2hunter2\n${"x".repeat(10_000)}`;
    const result = sanitizeHistory([
      {
        role: "bashExecution",
        content: "",
        command: `export OPENAI_API_KEY=${SECRET} && cat .env`,
        output: long,
        exitCode: 0,
        fullOutputPath: "/tmp/out.log",
        timestamp: 2,
      },
      { role: "compactionSummary", content: "", summary: `key ${SECRET}`, tokensBefore: 1000, timestamp: 3 },
      { role: "branchSummary", content: "", summary: "y".repeat(5000), fromId: "ab12cd34", timestamp: 4 },
    ]);
    const json = JSON.stringify(result.messages);
    expect(json).not.toContain(SECRET);
    expect(json).not.toContain("hunter2hunter2");
    const [bash, compaction, branch] = result.messages as [TranscriptMessage, TranscriptMessage, TranscriptMessage];
    expect(bash.command).toBe("export OPENAI_API_KEY=sk-123…1234 && cat .env");
    expect((bash.output as string).length).toBeLessThanOrEqual(4000 + TRUNCATION_SUFFIX.length);
    expect((bash.output as string).endsWith(TRUNCATION_SUFFIX)).toBe(true);
    expect(bash.fullOutputPath).toBe("/tmp/out.log");
    expect(bash.exitCode).toBe(0);
    expect(compaction.summary).toBe("key sk-123…1234");
    expect(compaction.tokensBefore).toBe(1000);
    expect((branch.summary as string).endsWith(TRUNCATION_SUFFIX)).toBe(true);
    expect(branch.fromId).toBe("ab12cd34");
    expect(result.contentRedacted).toBe(true);
    expect(result.contentTruncated).toBe(true);
  });

  it("redacts before cutting, so a secret straddling the cut is still masked", () => {
    const input = `${"x".repeat(3990)} ${SECRET} tail`;
    const result = sanitizeHistory([user(input)]);
    const content = result.messages[0]?.content as string;
    expect(content).not.toContain("sk-1234567");
    expect(content.endsWith(TRUNCATION_SUFFIX)).toBe(true);
    expect(result.contentRedacted).toBe(true);
  });

  it.each([
    ["string content", (t: string) => user(t), (m: TranscriptMessage) => m.content as string],
    [
      "text block",
      (t: string) => user([text(t)]),
      (m: TranscriptMessage) => (m.content as Array<{ text: string }>)[0]?.text ?? "",
    ],
    [
      "thinking",
      (t: string) => assistant([{ type: "thinking", thinking: t }]),
      (m: TranscriptMessage) => (m.content as Array<{ thinking: string }>)[0]?.thinking ?? "",
    ],
    ["message text", (t: string) => user("", { text: t }), (m: TranscriptMessage) => m.text as string],
  ])("cuts %s to maxChars with the suffix", (_label, build, read) => {
    const result = sanitizeHistory([build("y".repeat(5000))]);
    const out = read(result.messages[0] as TranscriptMessage);
    expect(out).toBe(`${"y".repeat(4000)}${TRUNCATION_SUFFIX}`);
    expect(result.contentTruncated).toBe(true);
    expect(result.truncated).toBe(true);
  });

  it("maxChars is configurable and surrogate-safe", () => {
    const result = sanitizeHistory([user("abc😀def")], { maxChars: 4 });
    expect(result.messages[0]?.content).toBe(`abc${TRUNCATION_SUFFIX}`);
  });

  it("thinking blocks lose their signature", () => {
    const result = sanitizeHistory([
      assistant([{ type: "thinking", thinking: "hmm", thinkingSignature: "EqQBCkgIARABGAIiQL".repeat(50) }, text("A")]),
    ]);
    expect(result.messages[0]?.content).toEqual([{ type: "thinking", thinking: "hmm" }, text("A")]);
    expect(result.contentTruncated).toBe(true);
  });

  it("image blocks lose their data and report its base64 length", () => {
    const data = "iVBORw0KGgo".repeat(100);
    const result = sanitizeHistory([user([text("look"), { type: "image", data, mimeType: "image/png" }])]);
    expect(result.messages[0]?.content).toEqual([
      text("look"),
      { type: "image", mimeType: "image/png", omitted: true, bytes: data.length },
    ]);
    expect(result.contentTruncated).toBe(true);
  });

  it("an image without data is marked omitted and keeps a known size", () => {
    const result = sanitizeHistory([user([{ type: "image", bytes: 1234 }])]);
    expect(result.messages[0]?.content).toEqual([{ type: "image", bytes: 1234, omitted: true }]);
    expect(result.contentTruncated).toBe(false);
  });

  it("tool-call arguments and other fields pass through", () => {
    const call = { type: "toolCall", id: "c1", name: "exec", arguments: { cmd: "ls" } };
    const result = sanitizeHistory([
      assistant([call], { timestamp: 5, provenance: { kind: "inter_session", sourceSessionKey: "agent:main:main" } }),
    ]);
    expect(result.messages[0]).toEqual({
      role: "assistant",
      content: [call],
      timestamp: 5,
      provenance: { kind: "inter_session", sourceSessionKey: "agent:main:main" },
    });
  });

  it("masks credentials in tool-call arguments and error messages (stored as sent: imports, redaction off)", () => {
    const key = "sk-proj-Abcdefghijklmnop1234567890x5jK0";
    const call = {
      type: "toolCall",
      id: "c2",
      name: "exec",
      arguments: { cmd: `curl -H 'Authorization: Bearer ${key}'`, apiKey: "Zx9qLmW2pR7tYv4bN8kC" },
    };
    const result = sanitizeHistory([assistant([call], { errorMessage: `OPENAI_API_KEY=${key} rejected` })]);
    const out = JSON.stringify(result.messages);
    expect(out).not.toContain(key);
    expect(out).not.toContain("Zx9qLmW2pR7tYv4bN8kC");
    expect(result.contentRedacted).toBe(true);
    expect((result.messages[0]!.content as (typeof call)[])[0]!.name).toBe("exec");
  });

  it("masks every other field of a block too: a tool_use input, a tool_result's nested content", () => {
    const password = "hunter3hunter3hunter3";
    const envPassword = "hunter4hunter4hunter4";
    const toolUse = { type: "tool_use", id: "c10", name: "exec", input: { db_password: password, host: "db" } };
    const toolResultBlock = {
      type: "tool_result",
      tool_use_id: "c10",
      content: [{ type: "text", text: `DB_PASSWORD=${envPassword}` }],
    };
    const input = [assistant([toolUse]), assistant([toolResultBlock])];
    for (const result of [sanitizeHistory(input), sanitizeHistory(input.slice(-1))]) {
      expect(JSON.stringify(result.messages)).not.toMatch(/hunter[34]/);
      expect(result.contentRedacted).toBe(true);
    }
    const [use, res] = sanitizeHistory(input).messages.map((m) => (m.content as ContentBlock[])[0]);
    expect(use).toEqual({ ...toolUse, input: { db_password: "hunter…ter3", host: "db" } });
    expect(res).toEqual({ ...toolResultBlock, content: [{ type: "text", text: "DB_PASSWORD=hunter…ter4" }] });
  });

  it("a block with nothing to mask is not reported as redacted; a mask stored on write is not masked again", () => {
    const input = [
      user("curl -H 'Authorization: Bearer abcdef…0123' https://api.example.com/v1?page=2"),
      assistant([
        { type: "tool_use", id: "c1", name: "exec", input: { cmd: "ls", token: "***", apiKey: "plainv…tern" } },
      ]),
      assistant([{ type: "toolCall", id: "c2", name: "exec", arguments: { db_password: "***" } }]),
      assistant([{ type: "image", data: "AAAA", mimeType: "image/png" }]),
    ];
    const result = sanitizeHistory(input);
    expect(result.contentRedacted).toBe(false);
    expect(result.messages[0]).toEqual(input[0]);
    expect(result.messages.slice(1, 3)).toEqual(input.slice(1, 3));
  });

  it("a message over 128 KB after sanitising becomes the chat.history placeholder in place", () => {
    const huge = assistant(
      [{ type: "toolCall", id: "c", name: "write", arguments: { body: "z".repeat(140 * 1024) } }],
      {
        timestamp: 9,
      },
    );
    const result = sanitizeHistory([user("a"), huge, user("b")], { maxBytes: 1024 * 1024 });
    expect(result.messages).toEqual([user("a"), { role: "assistant", content: CHAT_HISTORY_OMITTED_TEXT }, user("b")]);
    expect(result.contentTruncated).toBe(true);
    expect(result.droppedMessages).toBe(false);
  });

  it("many text blocks under the char limit can still add up past 128 KB", () => {
    const blocks = Array.from({ length: 40 }, () => text("w".repeat(3900)));
    const result = sanitizeHistory([user(blocks)], { maxBytes: 1024 * 1024 });
    expect(result.messages).toEqual([{ role: "user", content: CHAT_HISTORY_OMITTED_TEXT }]);
  });

  it("a long text alone is cut, not replaced by the placeholder", () => {
    const result = sanitizeHistory([user("q".repeat(300 * 1024))]);
    expect(result.messages[0]?.content).toBe(`${"q".repeat(4000)}${TRUNCATION_SUFFIX}`);
  });
});

describe("capChatHistory: chat.history's 128 KB per message and 6 MB per answer", () => {
  it("replaces a message over 128 KB by the placeholder in its place, leaves the others exactly as stored", () => {
    const small = assistant(
      [text(`as stored ${SECRET}`), { type: "thinking", thinking: "t", thinkingSignature: "s" }],
      {
        usage: { input: 1 },
        details: { x: 1 },
      },
    );
    const big = toolResult("y".repeat(129 * 1024));
    const out = capChatHistory([user("a", { timestamp: 1 }), { ...big, timestamp: 2 }, small]);
    expect(out).toEqual([
      user("a", { timestamp: 1 }),
      { role: "toolResult", content: CHAT_HISTORY_OMITTED_TEXT, timestamp: 2 },
      small,
    ]);
    expect(out[2]).toBe(small); // not sanitised, not even copied: the operators' view
  });

  it("drops the oldest messages until the answer fits 6 MB, keeping the newest", () => {
    const messages = Array.from({ length: 60 }, (_, i) => user(`${i} ${"z".repeat(120 * 1024)}`));
    const out = capChatHistory(messages);
    expect(jsonBytes(out)).toBeLessThanOrEqual(CHAT_HISTORY_MAX_BYTES);
    expect(jsonBytes([messages[60 - out.length - 1], ...out])).toBeGreaterThan(CHAT_HISTORY_MAX_BYTES);
    expect(out.at(-1)).toBe(messages.at(-1));
    expect(out[0]).toBe(messages[60 - out.length]);
    expect(capChatHistory(messages.slice(0, 3))).toEqual(messages.slice(0, 3));
    expect(capChatHistory([])).toEqual([]);
  });
});

describe("sanitizeHistory: byte cap and hard cap", () => {
  const bigTranscript: TranscriptMessage[] = Array.from({ length: 2000 }, (_, i) =>
    i % 2 === 0
      ? user(`question ${i}: ${"lorem ipsum ".repeat(10)}`)
      : assistant(`answer ${i}: ${"dolor sit amet ".repeat(10)}`),
  );

  it("drops the oldest messages of a 2,000-message transcript until it fits 80 KB", () => {
    const result = sanitizeHistory(bigTranscript);
    expect(result.bytes).toBeLessThanOrEqual(HISTORY_MAX_BYTES);
    expect(result.bytes).toBe(jsonBytes(result.messages));
    expect(result.messages.length).toBeGreaterThan(100);
    expect(result.messages.length).toBeLessThan(2000);
    // The kept messages are exactly the newest ones, in order.
    expect(result.messages).toEqual(bigTranscript.slice(2000 - result.messages.length));
    // One more message would not have fitted.
    const oneMore = bigTranscript.slice(2000 - result.messages.length - 1);
    expect(jsonBytes(oneMore)).toBeGreaterThan(HISTORY_MAX_BYTES);
    expect(result).toMatchObject({
      droppedMessages: true,
      truncated: true,
      contentTruncated: false,
      contentRedacted: false,
    });
  });

  it("respects a custom maxBytes", () => {
    const result = sanitizeHistory(bigTranscript, { maxBytes: 2000 });
    expect(result.bytes).toBeLessThanOrEqual(2000);
    expect(result.messages.at(-1)).toEqual(bigTranscript.at(-1));
  });

  it("hard cap: a single newest message too big for maxBytes becomes the sessions_history placeholder", () => {
    const blocks = Array.from({ length: 25 }, () => text("h".repeat(3900))); // ~98 KB: under 128 KB, over 80 KB
    const result = sanitizeHistory([user("older"), assistant(blocks)]);
    expect(result.messages).toEqual([{ role: "assistant", content: SESSIONS_HISTORY_OMITTED_TEXT }]);
    expect(result.bytes).toBe(jsonBytes(result.messages));
    expect(result).toMatchObject({ droppedMessages: true, truncated: true, contentTruncated: false });
  });

  it("an empty transcript is an empty array of 2 bytes", () => {
    expect(sanitizeHistory([])).toEqual({
      messages: [],
      truncated: false,
      droppedMessages: false,
      contentTruncated: false,
      contentRedacted: false,
      bytes: 2,
    });
  });

  it.each([
    ["maxChars 0", { maxChars: 0 }],
    ["maxBytes negative", { maxBytes: -1 }],
    ["maxBytes NaN", { maxBytes: Number.NaN }],
  ])("rejects %s", (_label, opts) => {
    expect(() => sanitizeHistory([user("x")], opts)).toThrow(RangeError);
  });
});

describe("sanitizeHistory: flags", () => {
  const longBlocks = Array.from({ length: 25 }, () => text("h".repeat(3900)));
  const flagCases: Array<[string, TranscriptMessage[], SanitizeHistoryOptions, Record<string, boolean>]> = [
    [
      "clean history",
      [user("hi"), assistant("hello")],
      {},
      { truncated: false, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
    [
      "usage removed",
      [assistant("x", { usage: { input: 1 } })],
      {},
      { truncated: true, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
    [
      "details removed",
      [toolResult("x")].map((m) => ({ ...m, details: { a: 1 } })),
      { includeTools: true },
      { truncated: true, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
    [
      "cost removed",
      [assistant("x", { cost: 1 })],
      {},
      { truncated: true, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
    [
      "text cut",
      [user("a".repeat(4001))],
      {},
      { truncated: true, droppedMessages: false, contentTruncated: true, contentRedacted: false },
    ],
    [
      "secret masked only",
      [user(`k ${SECRET}`)],
      {},
      { truncated: false, droppedMessages: false, contentTruncated: false, contentRedacted: true },
    ],
    [
      "signature removed",
      [assistant([{ type: "thinking", thinking: "t", thinkingSignature: "s" }])],
      {},
      { truncated: true, droppedMessages: false, contentTruncated: true, contentRedacted: false },
    ],
    [
      "image data removed",
      [user([{ type: "image", data: "AAAA" }])],
      {},
      { truncated: true, droppedMessages: false, contentTruncated: true, contentRedacted: false },
    ],
    [
      "oldest dropped",
      [user("a".repeat(100)), user("b".repeat(100))],
      { maxBytes: 150 },
      { truncated: true, droppedMessages: true, contentTruncated: false, contentRedacted: false },
    ],
    [
      "hard capped",
      [assistant(longBlocks)],
      {},
      { truncated: true, droppedMessages: true, contentTruncated: false, contentRedacted: false },
    ],
    [
      "tools filtered",
      [user("a"), toolResult("b")],
      {},
      { truncated: false, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
    [
      "NO_REPLY filtered",
      [user("a"), assistant("NO_REPLY")],
      {},
      { truncated: false, droppedMessages: false, contentTruncated: false, contentRedacted: false },
    ],
  ];

  it.each(flagCases)("%s", (_label, messages, opts, flags) => {
    const result = sanitizeHistory(messages, opts);
    expect({
      truncated: result.truncated,
      droppedMessages: result.droppedMessages,
      contentTruncated: result.contentTruncated,
      contentRedacted: result.contentRedacted,
    }).toEqual(flags);
    expect(result.bytes).toBe(jsonBytes(result.messages));
  });
});

describe("sanitizeHistory: purity and speed", () => {
  it("never mutates its input (deep-frozen input, identical afterwards)", () => {
    const input: TranscriptMessage[] = [
      user(`key ${SECRET}`, { details: { x: 1 } }),
      assistant(
        [
          { type: "thinking", thinking: "t", thinkingSignature: "sig" },
          text(`${THINK_OPEN}x${THINK_CLOSE}${"long ".repeat(1000)}`),
          { type: "toolCall", id: "c", name: "n", arguments: { a: [1, 2] } },
        ],
        { usage: { input: 1, output: 2 }, cost: 3 },
      ),
      user([{ type: "image", data: "AAAA", mimeType: "image/png" }]),
      toolResult("out"),
      assistant("NO_REPLY"),
    ];
    const snapshot = structuredClone(input);
    deepFreeze(input);
    const result = sanitizeHistory(input, { includeTools: true, maxBytes: 2000 });
    expect(input).toEqual(snapshot);
    expect(result.messages.length).toBeGreaterThan(0);
  });

  it("a 1 MB transcript is sanitised in well under a second", () => {
    const line = `Some words, a key OPENAI_API_KEY=${SECRET}, ${THINK_OPEN}hidden${THINK_CLOSE} and \`code\`. `;
    const oneMegabyte = line.repeat(Math.ceil((1024 * 1024) / line.length));
    const messages: TranscriptMessage[] = [
      user(oneMegabyte),
      assistant(oneMegabyte),
      assistant([text(oneMegabyte), { type: "thinking", thinking: oneMegabyte }]),
      ...Array.from({ length: 500 }, (_, i) => user(`m${i} ${line}`)),
    ];
    // This process's CPU time, not the wall clock: on a loaded machine (the suite runs two files
    // at once on two cores) waiting for a core is not the sanitiser's time. A pattern that
    // backtracks catastrophically would take minutes of CPU, not two seconds.
    const started = process.cpuUsage();
    const result = sanitizeHistory(messages);
    const used = process.cpuUsage(started);
    const elapsed = (used.user + used.system) / 1000;
    expect(result.bytes).toBeLessThanOrEqual(HISTORY_MAX_BYTES);
    expect(result.contentRedacted).toBe(true);
    expect(result.contentTruncated).toBe(true);
    expect(elapsed).toBeLessThan(2000);
  });
});
