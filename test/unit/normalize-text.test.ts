import { describe, expect, it } from "vitest";
import { findCodeRegions, isInsideCode, normalizeAssistantText } from "../../src/history/index.js";

// Tag names are assembled so that this file reads as data, not as markup.
const tag = (name: string, close = false): string => `<${close ? "/" : ""}${name}>`;
const block = (name: string, inner: string): string => `${tag(name)}${inner}${tag(name, true)}`;
const FENCE = "```";

describe("normalizeAssistantText: reasoning blocks", () => {
  it.each([
    ["think", `Hello ${block("think", "secret plan")}world`, "Hello world"],
    ["thinking", `${block("thinking", "step 1\nstep 2")}Answer`, "Answer"],
    ["thought", `${block("thought", "hmm")} The answer is 4.`, "The answer is 4."],
    ["antthinking", `${block("antthinking", "internal")}Visible`, "Visible"],
    ["antml:thinking", `${block("antml:thinking", "internal")}Visible`, "Visible"],
    ["antml:think", `A ${block("antml:think", "x")}B`, "A B"],
    ["upper-case tag", `${block("THINK", "x")}ok`, "ok"],
    ["tag with attributes", `<thinking type="hidden">x${tag("thinking", true)}ok`, "ok"],
    ["two blocks", `${block("think", "a")}one ${block("think", "b")}two`, "one two"],
    ["unterminated block hides the rest", `Answer first. ${tag("thinking")}and then rambling`, "Answer first."],
    ["stray closing tag is removed", `left over${tag("think", true)} text`, "left over text"],
    ["self-closing tag is removed alone", "a <think/> b", "a  b"],
  ])("%s", (_label, input, expected) => {
    expect(normalizeAssistantText(input)).toEqual({ text: expected, changed: true });
  });
});

describe("normalizeAssistantText: final and memory tags", () => {
  it.each([
    ["final tags keep their inner text", block("final", "The answer"), "The answer"],
    ["antml:final", block("antml:final", "Done."), "Done."],
    ["final around thinking", `${block("final", `${block("think", "x")}Yes`)}`, "Yes"],
    ["relevant-memories block", `${block("relevant-memories", "user likes tea")}Hi!`, "Hi!"],
    ["relevant_memories block", `Hi ${block("relevant_memories", "m")}there`, "Hi there"],
    ["unterminated memories block", `Intro ${tag("relevant-memories")}m1 m2`, "Intro"],
  ])("%s", (_label, input, expected) => {
    expect(normalizeAssistantText(input)).toEqual({ text: expected, changed: true });
  });
});

describe("normalizeAssistantText: plain-text tool-call XML", () => {
  it.each([
    [
      "tool_call with JSON",
      `Sure.\n${block("tool_call", '{"name":"exec","arguments":{"cmd":"ls"}}')}\nDone`,
      "Sure.\n\nDone",
    ],
    ["tool_result with JSON", `${block("tool_result", '[{"ok":true}]')}Result above`, "Result above"],
    [
      "function_call with JSON on the next line",
      `A ${tag("function_call")}\n  {"name":"x"}${tag("function_call", true)} B`,
      "A  B",
    ],
    [
      "function_calls with XML payload",
      `${tag("function_calls")}<invoke name="search">` +
        `<parameter name="q">x</parameter></invoke>${tag("function_calls", true)}Text`,
      "Text",
    ],
    ["tool_calls with JSON array", `${block("tool_calls", '[{"id":"1"}]')}after`, "after"],
    [
      "unterminated block strips to the end",
      `Let me check.\n${tag("tool_call")}\n{"name":"x","arguments":{`,
      "Let me check.",
    ],
    ["tag with attributes", `<tool_call id="7">{"a":1}${tag("tool_call", true)}ok`, "ok"],
    ["stray closing tag", `stray ${tag("tool_call", true)} close`, "stray  close"],
  ])("%s", (_label, input, expected) => {
    expect(normalizeAssistantText(input)).toEqual({ text: expected, changed: true });
  });

  it.each([
    [
      "tag followed by prose, with its closing tag",
      `The ${tag("tool_call")} tag wraps calls. ${tag("tool_call", true)}`,
    ],
    ["tag followed by a word", `Use ${tag("function_call")} sparingly.`],
    ["empty block", block("tool_call", "")],
  ])("kept: %s", (_label, input) => {
    expect(normalizeAssistantText(input)).toEqual({ text: input, changed: false });
  });
});

describe("normalizeAssistantText: downgraded tool text and markers", () => {
  it.each([
    [
      "tool call with Arguments JSON",
      '[Tool Call: exec (ID: toolu_1)]\nArguments: {"cmd":"ls -la","opts":{"a":[1,2]}}\nDone.',
      "Done.",
    ],
    ["tool call without arguments", "Before [Tool Call: ping (ID: 2)] after", "Before  after"],
    ["arguments JSON with a brace inside a string", '[Tool Call: x (ID: 3)]\nArguments: {"s":"}{"}\nok', "ok"],
    ["unterminated arguments JSON strips to the end", 'Text\n[Tool Call: x (ID: 4)]\nArguments: {"a":', "Text"],
    [
      "tool result block up to the next marker",
      "Before\n[Tool Result for ID t1]\nfile.txt\nother.txt\n[Tool Call: a (ID: 2)]\nArguments: {}\nAfter",
      "Before\nAfter",
    ],
    ["tool result block to the end", "Answer\n[Tool Result for ID t9]\nlots of output", "Answer"],
    [
      "historical context marker",
      '[Historical context: a different model called tool "x".]\nReal answer',
      "Real answer",
    ],
    ["lower-case marker", "[tool call: x (id: 1)] hi", "hi"],
  ])("%s", (_label, input, expected) => {
    expect(normalizeAssistantText(input)).toEqual({ text: expected, changed: true });
  });

  it("a marker without a closing bracket is kept", () => {
    const input = "[Tool Call: never closed";
    expect(normalizeAssistantText(input)).toEqual({ text: input, changed: false });
  });
});

describe("normalizeAssistantText: model control tokens and MiniMax", () => {
  it.each([
    ["token between words gets a space", "Hello<|im_end|>world", "Hello world"],
    ["token after a space", "Hello <|im_end|>world", "Hello world"],
    ["trailing token", "Hi there.<|endoftext|>", "Hi there."],
    ["full-width pipes", "a<｜end▁of▁sentence｜>b", "a b"],
    ["several tokens", "<|im_start|>assistant<|im_sep|>Answer<|im_end|>", "assistant Answer"],
    [
      "MiniMax invoke and wrapper",
      '<minimax:tool_call><invoke name="search"><parameter name="q">x</parameter></invoke></minimax:tool_call>Result',
      "Result",
    ],
    ["MiniMax closing wrapper only", "Answer</minimax:tool_call>", "Answer"],
  ])("%s", (_label, input, expected) => {
    expect(normalizeAssistantText(input)).toEqual({ text: expected, changed: true });
  });

  it("an invoke element without the MiniMax wrapper is ordinary text", () => {
    const input = '<invoke name="x">ok</invoke>';
    expect(normalizeAssistantText(input)).toEqual({ text: input, changed: false });
  });
});

describe("normalizeAssistantText: code is never touched", () => {
  it.each([
    ["think in a fence", `${FENCE}html\n${block("think", "keep")}\n${FENCE}`],
    ["think in inline code", `Write \`${block("think", "x")}\` to hide reasoning.`],
    ["tool_call in a fence", `${FENCE}\n${block("tool_call", '{"a":1}')}\n${FENCE}`],
    ["control token in inline code", "The `<|im_end|>` token ends a turn."],
    ["control token in a fence", `${FENCE}\nHello<|im_end|>world\n${FENCE}`],
    ["memories in a tilde fence", `~~~\n${block("relevant-memories", "m")}\n~~~`],
    ["final in inline code", `Use \`${block("final", "x")}\` tags.`],
    ["double-backtick span", `\`\` ${block("think", "a ` b")} \`\``],
    ["unterminated fence runs to the end", `text\n${FENCE}\n${block("think", "still code")}`],
    ["downgraded marker in a fence", `${FENCE}\n[Tool Call: x (ID: 1)]\nArguments: {}\n${FENCE}`],
    ["MiniMax in a fence", `${FENCE}\n<invoke name="x">y</invoke></minimax:tool_call>\n${FENCE}`],
  ])("%s", (_label, input) => {
    expect(normalizeAssistantText(input)).toEqual({ text: input, changed: false });
  });

  it("strips outside a fence and keeps the same tag inside it", () => {
    const code = `${FENCE}\n${block("think", "keep")}\n${FENCE}`;
    expect(normalizeAssistantText(`${block("think", "drop")}Example:\n${code}`).text).toBe(`Example:\n${code}`);
  });

  it("a thinking block around code removes the code with it", () => {
    const input = `${tag("think")}plan:\n${FENCE}\nx\n${FENCE}\n${tag("think", true)}Answer`;
    expect(normalizeAssistantText(input).text).toBe("Answer");
  });
});

describe("normalizeAssistantText: plain text", () => {
  it.each([
    ["prose", "The answer is 42."],
    ["comparison signs", "if a < b and c > d then | ok"],
    ["html", "<b>bold</b> and <i>italic</i>"],
    ["brackets", "[Note: see above] and [1]"],
    ["leading and trailing spaces are kept when nothing changed", "  padded  "],
    ["empty", ""],
  ])("%s is unchanged", (_label, input) => {
    expect(normalizeAssistantText(input)).toEqual({ text: input, changed: false });
  });
});

describe("findCodeRegions / isInsideCode", () => {
  it("finds fences and inline spans, sorted and disjoint", () => {
    const text = `a \`x\` b\n${FENCE}\ncode\n${FENCE}\nc \`\`y\`\``;
    const regions = findCodeRegions(text);
    expect(regions.map((r) => text.slice(r.start, r.end))).toEqual(["`x`", `${FENCE}\ncode\n${FENCE}`, "``y``"]);
    expect(isInsideCode(text.indexOf("x"), regions)).toBe(true);
    expect(isInsideCode(text.indexOf("b"), regions)).toBe(false);
    expect(isInsideCode(text.indexOf("code"), regions)).toBe(true);
  });

  it("an unmatched backtick is literal", () => {
    expect(findCodeRegions("it`s fine")).toEqual([]);
  });

  it("a backtick run is closed only by a run of the same length", () => {
    const text = "``` not closed by `` or `";
    expect(findCodeRegions(`x ${text}`)).toEqual([]);
  });
});

describe("normalizeAssistantText: linear time on hostile input", () => {
  const MB = 1024 * 1024;
  const fill = (unit: string): string => unit.repeat(Math.ceil(MB / unit.length));
  it.each([
    ["opening think tags", fill(tag("think"))],
    ["opening tool_call tags", fill(tag("tool_call"))],
    ["tool_call tags with payloads, never closed", fill(`${tag("tool_call")}{`)],
    ["control-token openers", fill("<|")],
    ["backtick runs of many widths", fill("`a``b```c````d")],
    ["historical markers without a bracket", fill("[Historical context: ")],
    ["tool result headers", fill("[Tool Result for ID x]\n")],
    ["MiniMax invokes never closed", fill("minimax:tool_call <invoke a>")],
    ["fence lines", fill(`${FENCE}\n`)],
    ["mixed realistic text", fill(`${block("think", "x")} \`code\` <|t|> [Tool Call: a (ID: 1)]\nword `)],
  ])("%s (1 MB) finishes fast", (_label, input) => {
    const started = performance.now();
    const result = normalizeAssistantText(input);
    const elapsed = performance.now() - started;
    expect(result.text.length).toBeLessThanOrEqual(input.length);
    expect(elapsed).toBeLessThan(2000);
  });
});
