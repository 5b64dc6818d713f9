/**
 * Lines Switchboard did not write itself (an import, another tool on the shared storage) may hold
 * any JSON as a message's content. The readers that turn content into text take it as no text
 * rather than fail: the openai runtime's history (an odd line failed every turn of its session
 * while it stayed in the history window) and the CLI's printed history.
 */
import { describe, expect, it } from "vitest";
import { buildChatMessages } from "../../src/runtimes/openai.js";
import { messageText, terminalSafe } from "../../src/cli/output.js";
import type { TranscriptMessage } from "../../src/history/transcript-types.js";

const ODD_CONTENTS: unknown[] = [undefined, null, 123, { text: "not an array" }, [null, 7, "bare", { type: 5 }]];

describe("odd message content", () => {
  it("the openai runtime's history skips it and keeps the rest", () => {
    const history = [
      { role: "user", content: "hello" },
      ...ODD_CONTENTS.map((content) => ({ role: "assistant", stopReason: "error", content })),
      { role: "assistant", content: [null, { type: "text", text: "pong" }] },
    ] as unknown as TranscriptMessage[];
    const messages = buildChatMessages({ systemPrompt: undefined }, { text: "next", history });
    expect(messages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: "pong" },
      { role: "user", content: "next" },
    ]);
  });

  it("the CLI prints it as blocks, never throws", () => {
    for (const content of ODD_CONTENTS) expect(() => messageText({ content })).not.toThrow();
    expect(messageText({ content: [null, { type: "text", text: "hi" }, { type: 5 }, { type: "toolCall" }] })).toBe(
      "[block]\nhi\n[block]\n[tool ?]",
    );
  });
});

describe("terminalSafe", () => {
  it("shows control characters and bidi controls as escapes; keeps newlines, tabs and ordinary text", () => {
    const hostile = "hi \u001b]0;pwned\u0007\u001b[2J\rOVER\u202eevil\u0085 café\tok\nnext";
    expect(terminalSafe(hostile)).toBe(
      "hi \\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{d}OVER\\u{202e}evil\\u{85} café\tok\nnext",
    );
    expect(terminalSafe("plain ✓ 日本語")).toBe("plain ✓ 日本語");
  });
});
