import { describe, expect, it } from "vitest";
import { deriveTitle } from "../../src/tools/session-row.js";
import type { SessionEntry } from "../../src/session/session-entry.js";

const entry = { key: "agent:main:x", sessionId: "0123456789abcdef", updatedAt: 0 } as SessionEntry;

describe("deriveTitle from the first user message", () => {
  it("masks credentials as sessions_history does", () => {
    const title = deriveTitle(entry, "OPENAI_API_KEY=sk-proj-Zx9qLmW2pR7tYv4bN8kCabc please deploy");
    expect(title).not.toContain("Zx9qLmW2pR7tYv4bN8kCabc");
    expect(title).toContain("OPENAI_API_KEY=");
  });

  it("never cuts an emoji in half", () => {
    const title = deriveTitle(entry, `${"a".repeat(59)}😀 and more words after it`);
    expect(title.isWellFormed()).toBe(true);
    expect(title.endsWith("…")).toBe(true);
  });
});
