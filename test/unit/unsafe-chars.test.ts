/** Control, bidi and invisible characters in keys, ids and labels (src/session/unsafe-chars.ts). */
import { describe, expect, it } from "vitest";
import {
  escapeUnsafeChars,
  findUnsafeChar,
  formatCodePoint,
  safeString,
  unsafeCharMessage,
  unsafeCharName,
} from "../../src/session/index.js";

describe("findUnsafeChar / unsafeCharMessage", () => {
  it("names the character and its index, as in the issue's example", () => {
    expect(unsafeCharMessage("session key", "agent:main:\u202Eabc")).toBe(
      "session key contains U+202E RIGHT-TO-LEFT OVERRIDE at index 11",
    );
  });

  it.each<[string, number, string]>([
    ["\u0000", 0x0, "NULL"],
    ["\t", 0x9, "CHARACTER TABULATION"],
    ["\u001f", 0x1f, "INFORMATION SEPARATOR ONE"],
    ["\u007f", 0x7f, "DELETE"],
    ["\u0080", 0x80, "C1 CONTROL"],
    ["\u009f", 0x9f, "C1 CONTROL"],
    ["\u00ad", 0xad, "SOFT HYPHEN"],
    ["\u061c", 0x61c, "ARABIC LETTER MARK"],
    ["\u200b", 0x200b, "ZERO WIDTH SPACE"],
    ["\u200e", 0x200e, "LEFT-TO-RIGHT MARK"],
    ["\u200f", 0x200f, "RIGHT-TO-LEFT MARK"],
    ["\u2028", 0x2028, "LINE SEPARATOR"],
    ["\u202a", 0x202a, "LEFT-TO-RIGHT EMBEDDING"],
    ["\u202b", 0x202b, "RIGHT-TO-LEFT EMBEDDING"],
    ["\u202c", 0x202c, "POP DIRECTIONAL FORMATTING"],
    ["\u202d", 0x202d, "LEFT-TO-RIGHT OVERRIDE"],
    ["\u202e", 0x202e, "RIGHT-TO-LEFT OVERRIDE"],
    ["\u2060", 0x2060, "WORD JOINER"],
    ["\u2066", 0x2066, "LEFT-TO-RIGHT ISOLATE"],
    ["\u2067", 0x2067, "RIGHT-TO-LEFT ISOLATE"],
    ["\u2068", 0x2068, "FIRST STRONG ISOLATE"],
    ["\u2069", 0x2069, "POP DIRECTIONAL ISOLATE"],
    ["\ufeff", 0xfeff, "ZERO WIDTH NO-BREAK SPACE"],
    ["\u{E0041}", 0xe0041, "TAG CHARACTER"],
    ["\ud83d", 0xd83d, "LONE HIGH SURROGATE"],
    ["\ude00", 0xde00, "LONE LOW SURROGATE"],
  ])("refuses %j in both profiles", (ch, cp, name) => {
    for (const profile of ["identifier", "label"] as const) {
      expect(findUnsafeChar(`ab${ch}cd`, { profile })).toEqual({ index: 2, codePoint: cp, name });
    }
  });

  it.each<[string, string]>([
    ["\u200c", "ZERO WIDTH NON-JOINER"],
    ["\u200d", "ZERO WIDTH JOINER"],
    ["\ufe0f", "VARIATION SELECTOR-16"],
    ["\u3164", "HANGUL FILLER"],
    ["\u{E0100}", "VARIATION SELECTOR-17"],
  ])("refuses %j in identifiers but keeps it in labels (scripts and emoji need it)", (ch, name) => {
    expect(findUnsafeChar(`x${ch}`, { profile: "identifier" })?.name).toBe(name);
    expect(findUnsafeChar(`x${ch}`, { profile: "label" })).toBeUndefined();
  });

  it.each([
    "agent:main:telegram:dm:12345",
    "agent:ops:discord:group:dev:thread:42",
    "Ünïcödé — 日本語 — русский — עברית — العربية",
    "👍🏽 rocket 🚀",
    "\uFFFD replacement char is well-formed",
  ])("accepts ordinary text %j", (text) => {
    expect(findUnsafeChar(text)).toBeUndefined();
    expect(unsafeCharMessage("key", text)).toBeUndefined();
  });

  it("keeps emoji ZWJ sequences and variation selectors in labels", () => {
    expect(findUnsafeChar("family 👨‍👩‍👧 ❤️", { profile: "label" })).toBeUndefined();
    expect(findUnsafeChar("family 👨‍👩‍👧", { profile: "identifier" })?.name).toBe("ZERO WIDTH JOINER");
  });

  it("counts indexes in UTF-16 code units and skips whole surrogate pairs", () => {
    // 🚀 is two code units: the RLO after it is at index 3.
    expect(findUnsafeChar("a🚀\u202E")).toMatchObject({ index: 3, codePoint: 0x202e });
    // A valid pair is not two lone surrogates; a high surrogate before a non-surrogate is lone.
    expect(findUnsafeChar("🚀🚀")).toBeUndefined();
    expect(findUnsafeChar("🚀\ud83dx")).toMatchObject({ index: 2, name: "LONE HIGH SURROGATE" });
    expect(findUnsafeChar("\ude80\ud83d")).toMatchObject({ index: 0, name: "LONE LOW SURROGATE" });
  });

  it("reports the first unsafe character when there are several", () => {
    expect(findUnsafeChar("a\u200Bb\u202E")).toMatchObject({ index: 1, codePoint: 0x200b });
  });

  it("with trimmed: true ignores outer whitespace but counts indexes from the start", () => {
    expect(findUnsafeChar(" \n main \n", { trimmed: true })).toBeUndefined();
    expect(findUnsafeChar("\n main \n")).toMatchObject({ index: 0, name: "LINE FEED" });
    expect(findUnsafeChar("\n ma\u202Ein\n", { trimmed: true })).toMatchObject({ index: 4 });
    expect(findUnsafeChar("   ", { trimmed: true })).toBeUndefined();
  });

  it("formats code points with at least four upper-case hex digits", () => {
    expect(formatCodePoint(0x7)).toBe("U+0007");
    expect(formatCodePoint(0x202e)).toBe("U+202E");
    expect(formatCodePoint(0xe0041)).toBe("U+E0041");
  });

  it("unsafeCharName is undefined for safe code points", () => {
    for (const cp of [0x20, 0x41, 0xa0, 0x5d0, 0x1f680, 0xfffd]) expect(unsafeCharName(cp)).toBeUndefined();
  });
});

describe("escapeUnsafeChars", () => {
  it("writes every unsafe character as \\u{…} so quoting bad input cannot reorder a message", () => {
    expect(escapeUnsafeChars("a\u202Eb\u0000c🚀\ud83d")).toBe("a\\u{202E}b\\u{0}c🚀\\u{D83D}");
  });
});

describe("safeString (zod)", () => {
  const schema = safeString("label", "label").min(1).max(10);

  it("refuses with one issue naming the character, at its index in the value as sent", () => {
    const r = schema.safeParse("  ab\u2067c");
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.message)).toEqual(["label contains U+2067 RIGHT-TO-LEFT ISOLATE at index 4"]);
  });

  it("trims after checking, so outer whitespace is still forgiven", () => {
    expect(schema.parse(" ops\n")).toBe("ops");
  });
});
