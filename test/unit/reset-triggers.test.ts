import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import {
  GREETING_PROMPT,
  currentTimeLine,
  greetingPrompt,
  parseNewModelHint,
  parseResetTrigger,
  type ModelHint,
  type ResetTriggerMatch,
} from "../../src/session/reset-triggers.js";
import { parseChatCommand, type ChatCommand } from "../../src/session/chat-commands.js";

const DEFAULT_TRIGGERS = parseConfig({}).session.resetTriggers;

describe("parseResetTrigger", () => {
  it.each<[string, ResetTriggerMatch]>([
    ["/new", { triggered: true, trigger: "/new", command: "new", remainder: "" }],
    ["/reset", { triggered: true, trigger: "/reset", command: "reset", remainder: "" }],
    ["/RESET", { triggered: true, trigger: "/reset", command: "reset", remainder: "" }],
    ["/New", { triggered: true, trigger: "/new", command: "new", remainder: "" }],
    ["  /new  ", { triggered: true, trigger: "/new", command: "new", remainder: "" }],
    ["\n\t/new", { triggered: true, trigger: "/new", command: "new", remainder: "" }],
    ["/new foo", { triggered: true, trigger: "/new", command: "new", remainder: "foo" }],
    ["/NEW KeepThisCase", { triggered: true, trigger: "/new", command: "new", remainder: "KeepThisCase" }],
    ["/new   take  notes  ", { triggered: true, trigger: "/new", command: "new", remainder: "take  notes" }],
    ["/new\nline two", { triggered: true, trigger: "/new", command: "new", remainder: "line two" }],
    [
      "/reset gpt-5 Hello There",
      { triggered: true, trigger: "/reset", command: "reset", remainder: "gpt-5 Hello There" },
    ],
    ["/new@my_bot", { triggered: true, trigger: "/new", command: "new", remainder: "" }],
    ["/reset@Bot_2 gpt-5 hi", { triggered: true, trigger: "/reset", command: "reset", remainder: "gpt-5 hi" }],
    ["/new@", { triggered: false }],
    ["/new@bot-x", { triggered: false }],
    ["/newer", { triggered: false }],
    ["/new-thing", { triggered: false }],
    ["/resetting now", { triggered: false }],
    ["please /new", { triggered: false }],
    ["new", { triggered: false }],
    ["", { triggered: false }],
    ["   ", { triggered: false }],
    ["/ne", { triggered: false }],
  ])("%j", (text, expected) => {
    expect(parseResetTrigger(text, DEFAULT_TRIGGERS)).toStrictEqual(expected);
  });

  it("uses the defaults when no triggers are given", () => {
    expect(parseResetTrigger("/Reset x")).toStrictEqual({
      triggered: true,
      trigger: "/reset",
      command: "reset",
      remainder: "x",
    });
  });

  it.each<[string, string[], ResetTriggerMatch]>([
    [
      "/fresh start over",
      ["/new", "/fresh"],
      { triggered: true, trigger: "/fresh", command: "fresh", remainder: "start over" },
    ],
    ["/FRESH", ["/Fresh"], { triggered: true, trigger: "/Fresh", command: "fresh", remainder: "" }],
    ["!clear", ["!clear"], { triggered: true, trigger: "!clear", command: "!clear", remainder: "" }],
    ["/new", ["/fresh"], { triggered: false }],
    [
      "/new-chat hi",
      ["/new", "/new-chat"],
      { triggered: true, trigger: "/new-chat", command: "new-chat", remainder: "hi" },
    ],
    [
      "/new chat hi",
      ["/new", "/new chat"],
      { triggered: true, trigger: "/new chat", command: "new chat", remainder: "hi" },
    ],
    ["/new", [], { triggered: false }],
    ["/new", ["", "  "], { triggered: false }],
  ])("%j with triggers %j", (text, triggers, expected) => {
    expect(parseResetTrigger(text, triggers)).toStrictEqual(expected);
  });
});

describe("parseNewModelHint", () => {
  const known = [
    "minimax/m2.7",
    "openai/gpt-5",
    "openai/gpt-5-mini",
    "anthropic/claude-sonnet-4-5",
    "fast",
    "Llama-3.3-70B",
  ];

  it.each<[string, string[], ModelHint]>([
    ["", known, { rest: "" }],
    ["   ", known, { rest: "" }],
    ["summarize this", known, { rest: "summarize this" }],
    // exact id / alias / provider/model
    ["openai/gpt-5 hello", known, { model: "openai/gpt-5", rest: "hello" }],
    ["OpenAI/GPT-5 Hello World", known, { model: "openai/gpt-5", rest: "Hello World" }],
    ["fast", known, { model: "fast", rest: "" }],
    ["FAST do it", known, { model: "fast", rest: "do it" }],
    ["llama-3.3-70b hi", known, { model: "Llama-3.3-70B", rest: "hi" }],
    // bare model part of a unique provider/model
    ["m2.7 go", known, { model: "minimax/m2.7", rest: "go" }],
    ["gpt-5 go", known, { model: "openai/gpt-5", rest: "go" }],
    // provider + model token pair
    ["minimax m2.7", known, { model: "minimax/m2.7", rest: "" }],
    ["MiniMax M2.7 Write A Poem", known, { model: "minimax/m2.7", rest: "Write A Poem" }],
    ["openai gpt-5-mini  keep  spacing", known, { model: "openai/gpt-5-mini", rest: "keep  spacing" }],
    // fuzzy: ≥ 6 chars and a unique known model starts with it
    ["minimax summarize", known, { model: "minimax/m2.7", rest: "summarize" }],
    ["claude-sonnet hi", known, { model: "anthropic/claude-sonnet-4-5", rest: "hi" }],
    ["anthropic hi", known, { model: "anthropic/claude-sonnet-4-5", rest: "hi" }],
    ["gpt-5- hi", known, { model: "openai/gpt-5-mini", rest: "hi" }],
    // not fuzzy
    ["openai hi", known, { rest: "openai hi" }], // two openai models: ambiguous
    ["claude hi", known, { model: "anthropic/claude-sonnet-4-5", rest: "hi" }], // 6 chars, unique model-part prefix
    ["llama hi", known, { rest: "llama hi" }], // < 6 chars
    ["gpt hi", known, { rest: "gpt hi" }],
    ["m2 hi", known, { rest: "m2 hi" }],
    ["minimax/m9 hi", known, { rest: "minimax/m9 hi" }],
    ["hello", [], { rest: "hello" }],
  ])("%j", (remainder, models, expected) => {
    expect(parseNewModelHint(remainder, models)).toStrictEqual(expected);
  });
});

describe("greetingPrompt", () => {
  it("ends with the current-time line, exactly once", () => {
    const now = Date.parse("2026-03-03T14:00:00.000Z");
    const text = greetingPrompt(now, "America/New_York");
    const line = "Current time: Tuesday, March 3rd, 2026 - 9:00 AM (America/New_York) / 2026-03-03 14:00 UTC";
    expect(text).toBe(`${GREETING_PROMPT}\n${line}`);
    expect(text.split(line).length - 1).toBe(1);
    expect(text.split("Current time:").length - 1).toBe(1);
    expect(text.startsWith("A new session was started via /new or /reset.")).toBe(true);
    expect(text).toContain("Keep it to 1-3 sentences and ask what they want to do.");
    expect(text).toContain("Do not mention internal steps, files, tools, or reasoning.");
  });

  it.each<[string, string, string]>([
    ["2026-03-01T18:05:00.000Z", "UTC", "Sunday, March 1st, 2026 - 6:05 PM (UTC) / 2026-03-01 18:05 UTC"],
    ["2026-03-02T00:00:00.000Z", "UTC", "Monday, March 2nd, 2026 - 12:00 AM (UTC) / 2026-03-02 00:00 UTC"],
    ["2026-03-11T12:30:00.000Z", "UTC", "Wednesday, March 11th, 2026 - 12:30 PM (UTC) / 2026-03-11 12:30 UTC"],
    ["2026-03-12T12:30:00.000Z", "UTC", "Thursday, March 12th, 2026 - 12:30 PM (UTC) / 2026-03-12 12:30 UTC"],
    ["2026-03-13T12:30:00.000Z", "UTC", "Friday, March 13th, 2026 - 12:30 PM (UTC) / 2026-03-13 12:30 UTC"],
    ["2026-03-22T12:30:00.000Z", "UTC", "Sunday, March 22nd, 2026 - 12:30 PM (UTC) / 2026-03-22 12:30 UTC"],
    ["2026-03-23T12:30:00.000Z", "UTC", "Monday, March 23rd, 2026 - 12:30 PM (UTC) / 2026-03-23 12:30 UTC"],
    [
      "2026-03-31T22:59:00.000Z",
      "Europe/Berlin",
      "Wednesday, April 1st, 2026 - 12:59 AM (Europe/Berlin) / 2026-03-31 22:59 UTC",
    ],
    [
      "2026-03-02T22:15:00.000Z",
      "Asia/Kathmandu",
      "Tuesday, March 3rd, 2026 - 4:00 AM (Asia/Kathmandu) / 2026-03-02 22:15 UTC",
    ],
  ])("%s in %s", (iso, tz, expected) => {
    expect(currentTimeLine(Date.parse(iso), tz)).toBe(`Current time: ${expected}`);
  });
});

describe("parseChatCommand", () => {
  it.each<[string, ChatCommand | null]>([
    ["/send on", { kind: "send", value: "allow" }],
    ["/send allow", { kind: "send", value: "allow" }],
    ["/SEND ON", { kind: "send", value: "allow" }],
    ["/send off", { kind: "send", value: "deny" }],
    ["/send deny", { kind: "send", value: "deny" }],
    ["/send inherit", { kind: "send", value: null }],
    ["/send default", { kind: "send", value: null }],
    ["/send reset", { kind: "send", value: null }],
    ["/send clear", { kind: "send", value: null }],
    ["  /send   Off  ", { kind: "send", value: "deny" }],
    ["/send@my_bot on", { kind: "send", value: "allow" }],
    ["/status", { kind: "status" }],
    ["/STATUS", { kind: "status" }],
    [" /status \n", { kind: "status" }],
    ["/status@my_bot", { kind: "status" }],
    ["/stop", { kind: "stop" }],
    ["/Stop", { kind: "stop" }],
    ["/status please", null],
    ["/stop it", null],
    ["/stopped", null],
    ["/statuses", null],
    ["/sender on", null],
    ["please /stop", null],
    ["status", null],
    ["", null],
    ["/new", null],
    ["hello", null],
  ])("%j", (text, expected) => {
    expect(parseChatCommand(text)).toStrictEqual(expected);
  });

  it.each(["/send", "/send maybe", "/send on off", "/send toString", "/send __proto__"])(
    "%j is a /send error",
    (text) => {
      const r = parseChatCommand(text);
      expect(r).not.toBeNull();
      expect(r?.kind).toBe("send");
      expect(r && "error" in r ? r.error : undefined).toMatch(/\/send on\|off\|inherit/);
    },
  );
});
