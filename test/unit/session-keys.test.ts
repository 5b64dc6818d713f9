/**
 * Pure session-key logic (docs/concepts/sessions.md): agent ids, sessionIds, parsing, inbound
 * routing, canonicalisation, classification. Table-driven; no Redis involved.
 */
import { describe, expect, it } from "vitest";
import { defaultAgentId, parseConfig, type Config, type ConfigInput } from "../../src/config/index.js";
import {
  InvalidAgentIdError,
  InvalidSessionIdError,
  InvalidSessionKeyError,
  ValidationError,
} from "../../src/errors/index.js";
import {
  agentIdFromSessionKey,
  announceTargetFromKey,
  assertAgentId,
  assertSafeSessionId,
  canonicalSessionKey,
  channelFromKey,
  chatTypeFromKey,
  classifySessionKeyShape,
  displaySessionKey,
  isCronRunKey,
  isReservedSessionKey,
  isSafeSessionId,
  isSubagentKey,
  isThreadSessionKey,
  isValidAgentId,
  looksLikeSessionId,
  looksLikeSessionKey,
  normalizeAccountId,
  normalizeAgentId,
  parseAgentSessionKey,
  parseInboundMessage,
  parseThreadSuffix,
  resolveInboundSession,
  resolveToolSessionRef,
  sessionKindFromKey,
  shouldResolveSessionIdInput,
  subagentDepthFromKey,
  subagentSessionKey,
  threadIdFromKey,
  threadSessionKey,
  type InboundSessionInput,
} from "../../src/session/index.js";

const cfg = (input: ConfigInput = {}): Config => parseConfig(input);

const DEFAULT = cfg();
const PER_PEER = cfg({ session: { dmScope: "per-peer" } });
const PER_CHANNEL_PEER = cfg({ session: { dmScope: "per-channel-peer" } });
const PER_ACCOUNT = cfg({ session: { dmScope: "per-account-channel-peer" } });
const LINKS: Record<string, string[]> = { alice: ["telegram:111111111", "discord:222222222222222222"] };
// OpenClaw's main-alias fixture: mainKey "work", default agent "ops".
const WORK_OPS = cfg({ session: { mainKey: "work" }, agents: { list: [{ id: "ops", default: true }] } });
const WORK_OPS_GLOBAL = cfg({
  session: { mainKey: "work", scope: "global" },
  agents: { list: [{ id: "ops", default: true }] },
});
const GLOBAL = cfg({ session: { scope: "global" } });
// A real agent called `main` next to the default `ops`: legacy `agent:main:main` must stay its own.
const MAIN_AND_OPS = cfg({ agents: { list: [{ id: "main" }, { id: "ops", default: true }] } });

const UUID = "3f2a9c1e-8b7d-4e6f-a1b2-c3d4e5f6a7b8";

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to throw");
}

// ───────────────────────────── agent ids ─────────────────────────────

describe("agent ids", () => {
  it.each<[unknown, boolean]>([
    ["main", true],
    ["my-research_agent01", true],
    ["0", true],
    ["Main", true], // upstream checks case-insensitively; lowercasing canonicalises
    ["  ops  ", true],
    ["a".repeat(64), true],
    ["a".repeat(65), false],
    ["Agent not found: xyz", false],
    ["../../../etc/passwd", false],
    ["", false],
    ["   ", false],
    ["-x", false],
    ["_x", false],
    ["a.b", false],
    ["a b", false],
    ["a/b", false],
    ["a:b", false],
    [42, false],
    [undefined, false],
  ])("isValidAgentId(%j) === %s", (value, expected) => {
    expect(isValidAgentId(value)).toBe(expected);
  });

  it.each<[string | null | undefined, string]>([
    ["", "main"],
    ["   ", "main"],
    [null, "main"],
    [undefined, "main"],
    ["Main", "main"],
    [" OPS ", "ops"],
    ["Agent not found: xyz", "agent-not-found-xyz"],
    ["../../../etc/passwd", "etc-passwd"],
    ["My Agent!", "my-agent"],
    ["---", "main"],
    ["__x", "x"],
    ["ÄBC", "bc"],
    ["a".repeat(65), "a".repeat(64)],
    [`${"a".repeat(63)}!b`, "a".repeat(63)], // truncation never leaves a trailing "-"
  ])("normalizeAgentId(%j) → %j", (value, expected) => {
    const out = normalizeAgentId(value);
    expect(out).toBe(expected);
    expect(isValidAgentId(out)).toBe(true);
  });

  it.each<[string | undefined, string]>([
    [undefined, "default"],
    ["", "default"],
    ["Tasks", "tasks"],
    ["my acct", "my-acct"],
  ])("normalizeAccountId(%j) → %j", (value, expected) => {
    expect(normalizeAccountId(value)).toBe(expected);
  });

  it.each([
    ["OPS", "ops"],
    [" main ", "main"],
    ["my-research_agent01", "my-research_agent01"],
  ])("assertAgentId(%j) → %j", (value, expected) => {
    expect(assertAgentId(value)).toBe(expected);
  });

  it.each<[unknown]>([["a/b"], [""], ["../x"], ["a".repeat(65)], [undefined], ["Agent not found: xyz"]])(
    "assertAgentId(%j) throws InvalidAgentIdError",
    (value) => {
      const err = thrown(() => assertAgentId(value));
      expect(err).toBeInstanceOf(InvalidAgentIdError);
      expect((err as InvalidAgentIdError).message).toContain("Agent IDs must match");
    },
  );
});

// ───────────────────────────── sessionIds ─────────────────────────────

describe("sessionIds used as file names", () => {
  it.each([UUID, "abc", "a", "0", "a.b", "a_b-c", "abc.jsonl", "a".repeat(128), "1700000000000-x"])(
    "accepts %j",
    (id) => {
      expect(isSafeSessionId(id)).toBe(true);
      expect(assertSafeSessionId(id)).toBe(id);
    },
  );

  it.each<[string, unknown]>([
    ["parent traversal", "../etc/passwd"],
    ["slash", "a/b"],
    ["backslash", "a\\b"],
    ["absolute path", "/abs"],
    ["dot-dot", ".."],
    ["dot", "."],
    ["hidden file", ".hidden"],
    ["embedded dot-dot", "a..b"],
    ["129 characters", "a".repeat(129)],
    ["uppercase UUID", UUID.toUpperCase()],
    ["mixed case", "Abc-1"],
    ["empty", ""],
    ["leading space", " abc"],
    ["trailing space", "abc "],
    ["colon", "a:b"],
    ["NUL byte", "a\u0000b"],
    ["newline", "a\nb"],
    ["leading dash", "-abc"],
    ["leading underscore", "_abc"],
    ["windows drive", "c:\\x"],
    ["number", 42],
    ["null", null],
    ["undefined", undefined],
  ])("refuses %s (%j)", (_label, id) => {
    expect(isSafeSessionId(id)).toBe(false);
    expect(thrown(() => assertSafeSessionId(id))).toBeInstanceOf(InvalidSessionIdError);
  });

  it.each<[string, boolean]>([
    [UUID, true],
    [UUID.toUpperCase(), true],
    [` ${UUID} `, true],
    ["not-a-uuid", false],
    [UUID.replace(/-/g, ""), false],
    [UUID.slice(0, -1), false],
    [UUID.replace("a", "g"), false],
    ["", false],
  ])("looksLikeSessionId(%j) === %s", (value, expected) => {
    expect(looksLikeSessionId(value)).toBe(expected);
  });

  it.each<[string, boolean]>([
    ["main", true],
    ["global", true],
    ["unknown", true],
    ["current", true],
    ["CURRENT", true],
    ["agent:main:main", true],
    ["cron:job-1", true],
    ["hook:x", true],
    ["node-macbook", true],
    ["node:macbook", true],
    ["acp:binding:x", true],
    ["agent:codex:acp:binding:discord:default:feedface", true],
    ["discord:group:123", true],
    ["slack:channel:c1", true],
    ["random-slug", false],
    [UUID, false],
    ["subagent:x", false],
    ["", false],
  ])("looksLikeSessionKey(%j) === %s", (value, expected) => {
    expect(looksLikeSessionKey(value)).toBe(expected);
  });

  it.each<[string, boolean]>([
    [UUID, true],
    ["random-slug", true],
    ["main", false],
    ["agent:main:main", false],
    ["discord:group:1", false],
  ])("shouldResolveSessionIdInput(%j) === %s", (value, expected) => {
    expect(shouldResolveSessionIdInput(value)).toBe(expected);
  });
});

// ───────────────────────────── parsing ─────────────────────────────

describe("parsing keys", () => {
  it.each<[string | null, { agentId: string; rest: string } | null]>([
    ["AGENT:Main:Hook:Webhook:42", { agentId: "main", rest: "hook:webhook:42" }],
    ["agent:main:main", { agentId: "main", rest: "main" }],
    ["agent:ops:discord:group:123", { agentId: "ops", rest: "discord:group:123" }],
    ["  agent:a:b  ", { agentId: "a", rest: "b" }],
    ["agent:a::b", { agentId: "a", rest: "b" }],
    ["agent:main:subagent:parent:subagent:child", { agentId: "main", rest: "subagent:parent:subagent:child" }],
    ["agent::broken", null],
    ["agent:main", null],
    ["agent:main::", null],
    ["agents:a:b", null],
    ["main", null],
    ["cron:job-1", null],
    ["", null],
    [null, null],
  ])("parseAgentSessionKey(%j)", (key, expected) => {
    expect(parseAgentSessionKey(key)).toEqual(expected);
  });

  it.each<[string | null, string]>([
    ["", "missing"],
    ["   ", "missing"],
    [null, "missing"],
    ["agent:main:main", "agent"],
    ["AGENT:Ops:Cron:X", "agent"],
    ["agent::broken", "malformed_agent"],
    ["agent:main", "malformed_agent"],
    ["AGENT:x", "malformed_agent"],
    ["main", "legacy_or_alias"],
    ["custom-main", "legacy_or_alias"],
    ["subagent:worker", "legacy_or_alias"],
  ])("classifySessionKeyShape(%j) === %s", (key, expected) => {
    expect(classifySessionKeyShape(key)).toBe(expected);
  });

  it.each<[string, string | undefined, string]>([
    ["agent:ops:main", "main", "ops"],
    ["AGENT:Research:x", "main", "research"],
    ["main", "ops", "ops"],
    ["cron:x", undefined, "main"],
    ["agent:main", "ops", "ops"],
  ])("agentIdFromSessionKey(%j, %j) → %j", (key, fallback, expected) => {
    expect(agentIdFromSessionKey(key, fallback)).toBe(expected);
  });

  it.each<[string, boolean]>([
    ["global", true],
    ["GLOBAL", true],
    [" unknown ", true],
    ["main", false],
    ["agent:main:global", false],
  ])("isReservedSessionKey(%j) === %s", (key, expected) => {
    expect(isReservedSessionKey(key)).toBe(expected);
  });

  it.each<[string, string, string | undefined]>([
    ["agent:main:slack:channel:General:Thread:1699999999.0001", "agent:main:slack:channel:General", "1699999999.0001"],
    ["agent:main:slack:channel:c1", "agent:main:slack:channel:c1", undefined],
    ["agent:main:telegram:personal:dm:12345:thread:12345:99", "agent:main:telegram:personal:dm:12345", "12345:99"],
    ["a:thread:1:thread:2", "a:thread:1", "2"],
    ["agent:main:telegram:group:-100:topic:5", "agent:main:telegram:group:-100:topic:5", undefined],
    ["a:thread:", "a", undefined],
    ["", "", undefined],
  ])("parseThreadSuffix(%j)", (key, base, threadId) => {
    expect(parseThreadSuffix(key)).toEqual({ baseSessionKey: base, threadId });
  });
});

// ───────────────────────────── inbound body ─────────────────────────────

describe("InboundMessageSchema", () => {
  const base = { channel: "telegram", chatType: "dm", from: "123", text: "hi" };

  it("normalises channel, chatType direct → dm, trims ids, stringifies numeric ids", () => {
    const msg = parseInboundMessage({
      channel: " Telegram ",
      chatType: "direct",
      from: " 123 ",
      text: "  hello  ",
      threadId: 99,
      messageId: 7,
      agentId: "OPS",
      timestamp: 1_700_000_000_000,
    });
    expect(msg).toEqual({
      channel: "telegram",
      chatType: "dm",
      from: "123",
      text: "  hello  ",
      threadId: "99",
      messageId: "7",
      agentId: "ops",
      timestamp: 1_700_000_000_000,
    });
  });

  it("accepts a group with a numeric Telegram chat id", () => {
    const msg = parseInboundMessage({ ...base, chatType: "group", groupId: -1001234567890, groupSubject: "Team" });
    expect(msg.groupId).toBe("-1001234567890");
    expect(msg.chatType).toBe("group");
  });

  it("takes an id past 2^53 as a string, digit for digit", () => {
    const msg = parseInboundMessage({
      ...base,
      chatType: "group",
      groupId: "9007199254740993",
      messageId: "9007199254740993",
    });
    expect(msg.groupId).toBe("9007199254740993");
    expect(msg.messageId).toBe("9007199254740993");
  });

  it.each<[string, Record<string, unknown> | unknown, string, string]>([
    ["missing channel", { chatType: "dm", from: "1", text: "x" }, "channel", ""],
    ["channel with ':'", { ...base, channel: "a:b" }, "channel", "channel id"],
    ["unknown key", { ...base, groupID: "1" }, "(root)", "groupID"],
    ["bad chatType", { ...base, chatType: "private" }, "chatType", ""],
    ["group without groupId", { ...base, chatType: "group" }, "groupId", 'required when chatType is "group"'],
    ["channel without groupId", { ...base, chatType: "channel" }, "groupId", 'required when chatType is "channel"'],
    ["blank text", { ...base, text: "   " }, "text", "text must not be empty"],
    ["missing text", { channel: "telegram", chatType: "dm", from: "1" }, "text", ""],
    ["zero timestamp", { ...base, timestamp: 0 }, "timestamp", "positive"],
    ["negative timestamp", { ...base, timestamp: -5 }, "timestamp", "positive"],
    ["fractional timestamp", { ...base, timestamp: 1.5 }, "timestamp", "integer"],
    ["timestamp in seconds", { ...base, timestamp: 1_764_000_000 }, "timestamp", "must be milliseconds"],
    ["empty from", { ...base, from: " " }, "from", "must not be empty"],
    ["control char in from", { ...base, from: "a\nb" }, "from", "from contains U+000A LINE FEED at index 1"],
    [
      "bidi override in from",
      { ...base, from: " 12\u202E34" },
      "from",
      "from contains U+202E RIGHT-TO-LEFT OVERRIDE at index 3",
    ],
    ["zero-width joiner in to", { ...base, to: "bot\u200D" }, "to", "to contains U+200D ZERO WIDTH JOINER at index 3"],
    [
      "isolate in groupId",
      { ...base, chatType: "group", groupId: "g\u2067" },
      "groupId",
      "groupId contains U+2067 RIGHT-TO-LEFT ISOLATE at index 1",
    ],
    ["bad agentId", { ...base, agentId: "../x" }, "agentId", "must match"],
    ["empty threadId", { ...base, threadId: "" }, "threadId", ""],
    ["overlong from", { ...base, from: "x".repeat(201) }, "from", "at most 200"],
    // Past 2^53 JSON.parse has rounded it already: 2^53 + 1 arrives as 2^53, another group's id.
    [
      "groupId number past 2^53",
      { ...base, chatType: "group", groupId: 2 ** 53 },
      "groupId",
      "send larger ids as strings",
    ],
    ["messageId number past 2^53", { ...base, messageId: -(2 ** 60) }, "messageId", "whole number"],
    ["threadId with a fraction", { ...base, threadId: 1.5 }, "threadId", "whole number"],
    ["threadId 1e21", { ...base, threadId: 1e21 }, "threadId", "whole number"],
  ])("rejects %s", (_label, body, path, message) => {
    const err = thrown(() => parseInboundMessage(body));
    expect(err).toBeInstanceOf(ValidationError);
    const issues = (err as ValidationError).issues;
    const hit = issues.find((i) => i.path === path);
    expect(hit, JSON.stringify(issues)).toBeDefined();
    expect(hit?.message).toContain(message);
  });

  it.each([[null], ["text"], [[]], [42]])("rejects a non-object body %j", (body) => {
    expect(thrown(() => parseInboundMessage(body))).toBeInstanceOf(ValidationError);
  });
});

// ───────────────────────────── inbound → session key ─────────────────────────────

type Row = [label: string, config: Config, msg: Partial<InboundSessionInput>, key: string, main?: string];
const dm = (from: string, extra: Partial<InboundSessionInput> = {}): Partial<InboundSessionInput> => ({
  channel: "telegram",
  chatType: "dm",
  from,
  ...extra,
});
const group = (channel: string, groupId: string | number, extra: Partial<InboundSessionInput> = {}) => ({
  channel,
  chatType: "group" as const,
  from: "someone",
  groupId,
  ...extra,
});

describe("resolveInboundSession", () => {
  const linked = (dmScope: "main" | "per-peer" | "per-channel-peer" | "per-account-channel-peer", links = LINKS) =>
    cfg({ session: { dmScope, identityLinks: links } });

  it.each<Row>([
    // dmScope modes
    ["dmScope main", DEFAULT, dm("123"), "agent:main:main"],
    ["per-peer", PER_PEER, dm("+15551234567"), "agent:main:dm:+15551234567"],
    [
      "per-channel-peer",
      PER_CHANNEL_PEER,
      dm("+15551234567", { channel: "whatsapp" }),
      "agent:main:whatsapp:dm:+15551234567",
    ],
    [
      "per-account-channel-peer",
      PER_ACCOUNT,
      dm("7550356539", { accountId: "tasks" }),
      "agent:main:telegram:tasks:dm:7550356539",
    ],
    ["per-account, no account → default", PER_ACCOUNT, dm("7550356539"), "agent:main:telegram:default:dm:7550356539"],
    [
      "per-account, account normalised",
      PER_ACCOUNT,
      dm("1", { accountId: "My Bot" }),
      "agent:main:telegram:my-bot:dm:1",
    ],
    ["peer lowercased", PER_PEER, dm("UserABC"), "agent:main:dm:userabc"],
    ["peer trimmed", PER_PEER, dm("  42  "), "agent:main:dm:42"],
    ["direct accepted, dm emitted", PER_CHANNEL_PEER, dm("9", { chatType: "direct" }), "agent:main:telegram:dm:9"],
    ["empty peer → main", PER_PEER, dm("   "), "agent:main:main"],
    ["channel lowercased", PER_CHANNEL_PEER, dm("9", { channel: "Discord" }), "agent:main:discord:dm:9"],
    // identityLinks
    ["links per-peer", linked("per-peer"), dm("111111111"), "agent:main:dm:alice"],
    [
      "links per-channel-peer",
      linked("per-channel-peer"),
      dm("222222222222222222", { channel: "discord" }),
      "agent:main:discord:dm:alice",
    ],
    ["links per-account", linked("per-account-channel-peer"), dm("111111111"), "agent:main:telegram:default:dm:alice"],
    ["links ignored with dmScope main", linked("main"), dm("111111111"), "agent:main:main"],
    [
      "link needs the right channel",
      linked("per-peer"),
      dm("111111111", { channel: "discord" }),
      "agent:main:dm:111111111",
    ],
    [
      "bare peer id candidate",
      linked("per-peer", { bob: ["555"] }),
      dm("555", { channel: "signal" }),
      "agent:main:dm:bob",
    ],
    [
      "first entry wins",
      linked("per-peer", { first: ["telegram:1"], second: ["telegram:1"] }),
      dm("1"),
      "agent:main:dm:first",
    ],
    ["canonical name lowercased", linked("per-peer", { Alice: ["telegram:1"] }), dm("1"), "agent:main:dm:alice"],
    ["link ids case-insensitive", linked("per-peer", { carol: ["Telegram:ABC"] }), dm("abc"), "agent:main:dm:carol"],
    [
      "peer case-insensitive vs link",
      linked("per-peer", { carol: ["telegram:abc"] }),
      dm("ABC"),
      "agent:main:dm:carol",
    ],
    // DM threads
    ["DM thread", PER_CHANNEL_PEER, dm("12345", { threadId: 99 }), "agent:main:telegram:dm:12345:thread:99"],
    ["DM thread, main scope", DEFAULT, dm("12345", { threadId: "99" }), "agent:main:main:thread:99"],
    ["DM thread lowercased", PER_PEER, dm("1", { threadId: "AbC" }), "agent:main:dm:1:thread:abc"],
    // agents and mainKey
    ["explicit agentId", DEFAULT, dm("1", { agentId: "ops" }), "agent:ops:main", "agent:ops:main"],
    ["explicit agentId uppercase", PER_PEER, dm("1", { agentId: "OPS" }), "agent:ops:dm:1", "agent:ops:main"],
    ["configured mainKey", WORK_OPS, dm("1"), "agent:ops:work", "agent:ops:work"],
    [
      "default agent from config",
      cfg({ agents: { list: [{ id: "ops" }] } }),
      dm("1"),
      "agent:ops:main",
      "agent:ops:main",
    ],
    // groups and channels
    ["telegram group", DEFAULT, group("telegram", "-1001234567890"), "agent:main:telegram:group:-1001234567890"],
    ["numeric group id", DEFAULT, group("telegram", -1001234567890), "agent:main:telegram:group:-1001234567890"],
    [
      "discord channel",
      DEFAULT,
      { ...group("discord", "1468834856187203680"), chatType: "channel" },
      "agent:main:discord:channel:1468834856187203680",
    ],
    [
      "empty channel id → unknown",
      DEFAULT,
      { ...group("discord", ""), chatType: "channel" },
      "agent:main:discord:channel:unknown",
    ],
    [
      "group id lowercased",
      DEFAULT,
      { ...group("slack", "C0ABC"), chatType: "channel" },
      "agent:main:slack:channel:c0abc",
    ],
    [
      "groups ignore accountId",
      PER_ACCOUNT,
      group("telegram", "-100", { accountId: "tasks" }),
      "agent:main:telegram:group:-100",
    ],
    ["groups ignore dmScope", PER_PEER, group("whatsapp", "123@g.us"), "agent:main:whatsapp:group:123@g.us"],
    [
      "group for another agent",
      DEFAULT,
      group("discord", "dev", { agentId: "ops" }),
      "agent:ops:discord:group:dev",
      "agent:ops:main",
    ],
    // topics and threads
    [
      "telegram topic",
      DEFAULT,
      group("telegram", "-1001234567890", { threadId: "99" }),
      "agent:main:telegram:group:-1001234567890:topic:99",
    ],
    [
      "telegram topic, numeric",
      DEFAULT,
      group("telegram", -100123, { threadId: 77 }),
      "agent:main:telegram:group:-100123:topic:77",
    ],
    // REFERENCE §1.5: a forum's General topic (id 1) stays on the chat's session.
    [
      "telegram General topic (numeric 1) is chat-scoped",
      DEFAULT,
      group("telegram", "-100123", { threadId: 1 }),
      "agent:main:telegram:group:-100123",
    ],
    [
      "telegram General topic (string 1) is chat-scoped",
      DEFAULT,
      group("telegram", "-100123", { threadId: " 1 " }),
      "agent:main:telegram:group:-100123",
    ],
    [
      "telegram topic 11 is still a topic",
      DEFAULT,
      group("telegram", "-100123", { threadId: 11 }),
      "agent:main:telegram:group:-100123:topic:11",
    ],
    [
      "telegram DM thread 1 is a DM thread (not a forum topic)",
      PER_CHANNEL_PEER,
      dm("12345", { threadId: 1 }),
      "agent:main:telegram:dm:12345:thread:1",
    ],
    [
      "slack thread",
      DEFAULT,
      { ...group("slack", "c1", { threadId: "1699999999.0001" }), chatType: "channel" },
      "agent:main:slack:channel:c1:thread:1699999999.0001",
    ],
    [
      "group thread on another channel",
      DEFAULT,
      group("matrix", "!room", { threadId: "$EvT" }),
      "agent:main:matrix:group:!room:thread:$evt",
    ],
    [
      "telegram channel thread is a plain thread",
      DEFAULT,
      { ...group("telegram", "-100", { threadId: "5" }), chatType: "channel" },
      "agent:main:telegram:channel:-100:thread:5",
    ],
    // Ids with empty ':'-segments are written as every key reader reads them (empty segments dropped).
    ["group id with a trailing ':'", DEFAULT, group("discord", "abc:"), "agent:main:discord:group:abc"],
    ["group id with '::'", DEFAULT, group("discord", "a::b"), "agent:main:discord:group:a:b"],
    ["group id of ':' only", DEFAULT, group("discord", ":"), "agent:main:discord:group:unknown"],
    ["IPv6 peer", PER_PEER, dm("fe80::1"), "agent:main:dm:fe80:1"],
    [
      "thread id with '::'",
      DEFAULT,
      group("slack", "c1", { threadId: "t::1" }),
      "agent:main:slack:group:c1:thread:t:1",
    ],
    // scope global
    ["global dm", GLOBAL, dm("1"), "global", "global"],
    ["global group", GLOBAL, group("discord", "dev"), "global", "global"],
    ["global per-peer", cfg({ session: { scope: "global", dmScope: "per-peer" } }), dm("1"), "global", "global"],
  ])("%s", (_label, config, msg, key, main = `agent:main:${config.session.mainKey}`) => {
    const out = resolveInboundSession(config, msg as InboundSessionInput);
    expect(out.sessionKey).toBe(key);
    expect(out.mainSessionKey).toBe(main);
    expect(out.agentId).toBe(msg.agentId?.toLowerCase() ?? defaultAgentId(config));
    // Built keys are already canonical.
    expect(canonicalSessionKey(config, out.sessionKey)).toBe(out.sessionKey);
  });

  it("works on a parsed /v1/inbound body", () => {
    const msg = parseInboundMessage({ channel: "Telegram", chatType: "direct", from: "111111111", text: "hi" });
    expect(resolveInboundSession(cfg({ session: { dmScope: "per-peer", identityLinks: LINKS } }), msg)).toEqual({
      agentId: "main",
      sessionKey: "agent:main:dm:alice",
      mainSessionKey: "agent:main:main",
    });
  });

  it("refuses an invalid agentId", () => {
    expect(
      thrown(() => resolveInboundSession(DEFAULT, dm("1", { agentId: "../x" }) as InboundSessionInput)),
    ).toBeInstanceOf(InvalidAgentIdError);
  });

  it("refuses a key longer than 512 characters", () => {
    const err = thrown(() => resolveInboundSession(PER_PEER, dm("x".repeat(600)) as InboundSessionInput));
    expect(err).toBeInstanceOf(InvalidSessionKeyError);
    expect((err as Error).message).toContain("longer than 512");
  });

  it.each<[string, string | number | undefined, string]>([
    ["agent:main:slack:channel:c1", "ABC", "agent:main:slack:channel:c1:thread:abc"],
    ["agent:main:slack:channel:c1", 7, "agent:main:slack:channel:c1:thread:7"],
    ["agent:main:slack:channel:c1", " ", "agent:main:slack:channel:c1"],
    ["agent:main:slack:channel:c1", undefined, "agent:main:slack:channel:c1"],
  ])("threadSessionKey(%j, %j) → %j", (base, threadId, expected) => {
    expect(threadSessionKey(base, threadId)).toBe(expected);
  });

  it("subagentSessionKey builds agent:<a>:subagent:<uuid>", () => {
    expect(subagentSessionKey("ops", UUID.toUpperCase())).toBe(`agent:ops:subagent:${UUID}`);
    expect(thrown(() => subagentSessionKey("main", ""))).toBeInstanceOf(InvalidSessionKeyError);
    expect(thrown(() => subagentSessionKey("main", "a:b"))).toBeInstanceOf(InvalidSessionKeyError);
    expect(thrown(() => subagentSessionKey("bad/id", UUID))).toBeInstanceOf(InvalidAgentIdError);
  });
});

// ───────────────────────────── canonicalisation ─────────────────────────────

describe("canonicalSessionKey", () => {
  it.each<[label: string, config: Config, key: string, agentId: string | undefined, expected: string]>([
    // main aliases, default config
    ["main", DEFAULT, "main", undefined, "agent:main:main"],
    ["MAIN", DEFAULT, "MAIN", undefined, "agent:main:main"],
    ["padded main", DEFAULT, "  main  ", undefined, "agent:main:main"],
    ["agent main key", DEFAULT, "agent:main:main", undefined, "agent:main:main"],
    ["main of another agent", DEFAULT, "agent:ops:main", undefined, "agent:ops:main"],
    ["main with opts.agentId", DEFAULT, "main", "research", "agent:research:main"],
    // bare request keys get the owner agent
    ["cron job", DEFAULT, "cron:job-1", undefined, "agent:main:cron:job-1"],
    ["hook", DEFAULT, "hook:x", undefined, "agent:main:hook:x"],
    ["bare group key", DEFAULT, "discord:group:123", undefined, "agent:main:discord:group:123"],
    ["mixed case bare key", DEFAULT, "MySession", undefined, "agent:main:mysession"],
    ["node", DEFAULT, "node-macbook", undefined, "agent:main:node-macbook"],
    ["bare UUID", DEFAULT, UUID, undefined, `agent:main:${UUID}`],
    ["bare key, opts.agentId", DEFAULT, "cron:job-1", "research", "agent:research:cron:job-1"],
    ["opts.agentId lowercased", DEFAULT, "cron:job-1", "OPS", "agent:ops:cron:job-1"],
    ["agent key keeps its own agent", DEFAULT, "agent:ops:x", "research", "agent:ops:x"],
    ["empty segments dropped (bare)", DEFAULT, "discord::group:1", undefined, "agent:main:discord:group:1"],
    ["empty segments dropped (agent)", DEFAULT, "agent:a::b", undefined, "agent:a:b"],
    // already-agent keys re-canonicalised
    ["uppercase agent key", DEFAULT, "AGENT:Main:Hook:Webhook:42", undefined, "agent:main:hook:webhook:42"],
    ["cron run", DEFAULT, "agent:main:cron:abc-123:run:def-456", undefined, "agent:main:cron:abc-123:run:def-456"],
    [
      "thread suffix lowercased",
      DEFAULT,
      "agent:main:slack:channel:General:Thread:1699999999.0001",
      undefined,
      "agent:main:slack:channel:general:thread:1699999999.0001",
    ],
    [
      "telegram topic",
      DEFAULT,
      "agent:main:telegram:group:-100123:topic:99",
      undefined,
      "agent:main:telegram:group:-100123:topic:99",
    ],
    [
      "acp key",
      DEFAULT,
      "agent:codex:acp:binding:discord:default:feedface",
      undefined,
      "agent:codex:acp:binding:discord:default:feedface",
    ],
    [
      "nested subagent",
      DEFAULT,
      "agent:main:subagent:parent:subagent:child",
      undefined,
      "agent:main:subagent:parent:subagent:child",
    ],
    // direct → dm
    ["per-channel direct", DEFAULT, "agent:main:discord:direct:user1", undefined, "agent:main:discord:dm:user1"],
    ["per-peer direct", DEFAULT, "agent:main:direct:+15551234567", undefined, "agent:main:dm:+15551234567"],
    [
      "per-account direct",
      DEFAULT,
      "agent:main:telegram:tasks:direct:7550356539",
      undefined,
      "agent:main:telegram:tasks:dm:7550356539",
    ],
    ["bare direct", DEFAULT, "telegram:direct:123", undefined, "agent:main:telegram:dm:123"],
    ["bare per-peer direct", DEFAULT, "direct:alice", undefined, "agent:main:dm:alice"],
    [
      "telegram DM thread",
      DEFAULT,
      "agent:main:telegram:personal:direct:12345:thread:12345:99",
      undefined,
      "agent:main:telegram:personal:dm:12345:thread:12345:99",
    ],
    ["peer named direct untouched", DEFAULT, "agent:main:dm:direct", undefined, "agent:main:dm:direct"],
    ["cron job named direct untouched", DEFAULT, "cron:direct:run:x", undefined, "agent:main:cron:direct:run:x"],
    ["dm stays dm", DEFAULT, "agent:main:discord:dm:user1", undefined, "agent:main:discord:dm:user1"],
    // legacy migrations
    ["legacy subagent", DEFAULT, "subagent:x", undefined, "agent:main:subagent:x"],
    ["legacy whatsapp group", DEFAULT, "group:123@g.us", undefined, "agent:main:whatsapp:group:123@g.us"],
    ["legacy whatsapp group, other agent", DEFAULT, "group:120363@g.us", "ops", "agent:ops:whatsapp:group:120363@g.us"],
    ["legacy group", DEFAULT, "group:family", undefined, "agent:main:unknown:group:family"],
    ["legacy channel", DEFAULT, "channel:general", undefined, "agent:main:unknown:channel:general"],
    [
      "legacy group under agent prefix",
      DEFAULT,
      "agent:main:group:123@g.us",
      undefined,
      "agent:main:whatsapp:group:123@g.us",
    ],
    // reserved
    ["global", DEFAULT, "global", undefined, "global"],
    ["GLOBAL", DEFAULT, " GLOBAL ", undefined, "global"],
    ["unknown", DEFAULT, "unknown", undefined, "unknown"],
    // mainKey "work", default agent "ops" (OpenClaw's test cases)
    ["work: main", WORK_OPS, "main", undefined, "agent:ops:work"],
    ["work: work", WORK_OPS, "work", undefined, "agent:ops:work"],
    ["work: WORK", WORK_OPS, "WORK", undefined, "agent:ops:work"],
    ["work: agent:ops:main", WORK_OPS, "agent:ops:main", undefined, "agent:ops:work"],
    ["work: agent:ops:MAIN", WORK_OPS, "agent:ops:MAIN", undefined, "agent:ops:work"],
    ["work: MAIN", WORK_OPS, "MAIN", undefined, "agent:ops:work"],
    ["work: agent:ops:work", WORK_OPS, "agent:ops:work", undefined, "agent:ops:work"],
    ["work: bare group", WORK_OPS, "discord:group:123", undefined, "agent:ops:discord:group:123"],
    ["work: MySession", WORK_OPS, "MySession", undefined, "agent:ops:mysession"],
    ["work: legacy agent:main:work", WORK_OPS, "agent:main:work", undefined, "agent:ops:work"],
    ["work: legacy agent:main:main", WORK_OPS, "agent:main:main", undefined, "agent:ops:work"],
    ["work: legacy main for opts agent", WORK_OPS, "agent:main:main", "research", "agent:research:work"],
    ["work: other agent:main keys kept", WORK_OPS, "agent:main:cron:x", undefined, "agent:main:cron:x"],
    // a real `main` agent keeps its own main session
    ["real main agent", MAIN_AND_OPS, "agent:main:main", undefined, "agent:main:main"],
    ["implicit main agent, opts.agentId", DEFAULT, "agent:main:main", "ops", "agent:main:main"],
    ["bare main → default ops", MAIN_AND_OPS, "main", undefined, "agent:ops:main"],
    // scope global
    ["global: main", GLOBAL, "main", undefined, "global"],
    ["global: agent:main:main", GLOBAL, "agent:main:main", undefined, "global"],
    ["global: other agent's main", GLOBAL, "agent:ops:main", undefined, "global"],
    ["global: non-main key", GLOBAL, "cron:job-1", undefined, "agent:main:cron:job-1"],
    ["work+global: main", WORK_OPS_GLOBAL, "main", undefined, "global"],
    ["work+global: work", WORK_OPS_GLOBAL, "work", undefined, "global"],
    ["work+global: agent:ops:work", WORK_OPS_GLOBAL, "agent:ops:work", undefined, "global"],
    ["work+global: legacy agent:main:main", WORK_OPS_GLOBAL, "agent:main:main", undefined, "global"],
    ["work+global: cron", WORK_OPS_GLOBAL, "cron:job-1", undefined, "agent:ops:cron:job-1"],
    // length boundary: 512 is fine
    ["512 characters", DEFAULT, `agent:main:${"x".repeat(501)}`, undefined, `agent:main:${"x".repeat(501)}`],
  ])("%s: %j → %j", (_label, config, key, agentId, expected) => {
    const out = canonicalSessionKey(config, key, agentId === undefined ? undefined : { agentId });
    expect(out).toBe(expected);
    // Idempotent: a canonical key canonicalises to itself.
    expect(canonicalSessionKey(config, out, agentId === undefined ? undefined : { agentId })).toBe(out);
  });

  it.each<[label: string, key: unknown, reason: string]>([
    ["empty", "", "empty"],
    ["whitespace", "   ", "empty"],
    ["agent::broken", "agent::broken", "malformed agent session key"],
    ["agent:main", "agent:main", "malformed agent session key"],
    ["agent:", "agent:", "malformed agent session key"],
    ["AGENT:Main", "AGENT:Main", "malformed agent session key"],
    ["dot in agent id", "agent:bad.id:main", "invalid agent id segment"],
    ["leading dash agent id", "agent:-x:main", "invalid agent id segment"],
    ["65-char agent id", `agent:${"a".repeat(65)}:main`, "invalid agent id segment"],
    ["traversal agent id", "agent:../../etc:passwd", "invalid agent id segment"],
    ["dot-dot agent id", "agent:..:main", "invalid agent id segment"],
    ["513 characters", "x".repeat(513), "longer than 512"],
    ["too long once prefixed", "x".repeat(505), "longer than 512"],
    ["only separators", ":::", "no segments"],
    [
      "Telegram topic id too long for a transcript file name",
      `agent:main:telegram:group:1:topic:${"a".repeat(200)}`,
      "too long for a transcript file name",
    ],
    ["not a string", 42, "must be a string"],
  ])("refuses %s", (_label, key, reason) => {
    const err = thrown(() => canonicalSessionKey(DEFAULT, key as string));
    expect(err).toBeInstanceOf(InvalidSessionKeyError);
    expect((err as InvalidSessionKeyError).code).toBe("invalid_session_key");
    expect((err as Error).message).toContain(reason);
  });

  it.each<[label: string, key: string, message: string]>([
    ["NUL", "main\u0000x", "session key contains U+0000 NULL at index 4"],
    ["BEL", "a\u0007b", "session key contains U+0007 BELL at index 1"],
    ["ESC", "a\u001bb", "session key contains U+001B ESCAPE at index 1"],
    ["inner newline", "ma\nin", "session key contains U+000A LINE FEED at index 2"],
    ["C1 control", "a\u0085b", "session key contains U+0085 NEXT LINE at index 1"],
    [
      "RLO, index counted in the key as sent",
      "  agent:main:x\u202Etxt.exe",
      "session key contains U+202E RIGHT-TO-LEFT OVERRIDE at index 14",
    ],
    ["isolate", "cron:\u2066x", "session key contains U+2066 LEFT-TO-RIGHT ISOLATE at index 5"],
    ["zero-width space", "ma\u200Bin", "session key contains U+200B ZERO WIDTH SPACE at index 2"],
    ["lone surrogate", "hook:\uD83D", "session key contains U+D83D LONE HIGH SURROGATE at index 5"],
  ])("refuses %s with a ValidationError naming the character", (_label, key, message) => {
    const err = thrown(() => canonicalSessionKey(DEFAULT, key));
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe("invalid_request");
    expect((err as Error).message).toBe(message);
  });

  it("still trims outer whitespace (a pasted trailing newline is not an unsafe character)", () => {
    expect(canonicalSessionKey(DEFAULT, " cron:x\n")).toBe("agent:main:cron:x");
  });

  it("refuses an invalid opts.agentId", () => {
    expect(thrown(() => canonicalSessionKey(DEFAULT, "cron:x", { agentId: "bad/id" }))).toBeInstanceOf(
      InvalidAgentIdError,
    );
  });
});

describe("displaySessionKey and resolveToolSessionRef", () => {
  it.each<[Config, string, string, string]>([
    [DEFAULT, "agent:main:main", "main", "main"],
    [DEFAULT, "agent:ops:main", "main", "agent:ops:main"],
    [DEFAULT, "agent:ops:main", "ops", "main"],
    [DEFAULT, "agent:main:cron:x", "main", "agent:main:cron:x"],
    [WORK_OPS, "agent:ops:work", "ops", "main"],
    [WORK_OPS, "agent:ops:main", "ops", "agent:ops:main"],
    [GLOBAL, "global", "main", "main"],
    [DEFAULT, "global", "main", "global"],
  ])("displaySessionKey(%#) %j as %j → %j", (config, key, requester, expected) => {
    expect(displaySessionKey(config, key, requester)).toBe(expected);
  });

  it.each<[label: string, config: Config, input: string, requesterKey: string, expected: string]>([
    ["main from a group", DEFAULT, "main", "agent:main:discord:group:dev", "agent:main:main"],
    ["main of the caller's agent", DEFAULT, "main", "agent:ops:subagent:x", "agent:ops:main"],
    ["MAIN", DEFAULT, "MAIN", "agent:ops:subagent:x", "agent:ops:main"],
    ["current", DEFAULT, "current", "agent:ops:subagent:abc", "agent:ops:subagent:abc"],
    ["Current, uppercase requester", DEFAULT, " Current ", "AGENT:Ops:Subagent:ABC", "agent:ops:subagent:abc"],
    ["bare key owned by caller agent", DEFAULT, "cron:job-1", "agent:ops:dm:x", "agent:ops:cron:job-1"],
    ["full key passes", DEFAULT, "agent:main:main", "agent:ops:dm:x", "agent:main:main"],
    ["direct normalised", DEFAULT, "agent:main:discord:direct:1", "agent:ops:dm:x", "agent:main:discord:dm:1"],
    ["mainKey work", WORK_OPS, "main", "agent:ops:dm:x", "agent:ops:work"],
    ["mainKey work, other agent", WORK_OPS, "work", "agent:research:x", "agent:research:work"],
    ["global main", GLOBAL, "main", "global", "global"],
    ["global current", GLOBAL, "current", "global", "global"],
  ])("%s", (_label, config, input, requesterKey, expected) => {
    expect(resolveToolSessionRef(config, input, { requesterKey })).toBe(expected);
  });

  it("refuses empty tool input", () => {
    expect(thrown(() => resolveToolSessionRef(DEFAULT, "  ", { requesterKey: "agent:main:main" }))).toBeInstanceOf(
      InvalidSessionKeyError,
    );
  });
});

// ───────────────────────────── classification ─────────────────────────────

describe("classification from keys", () => {
  it.each<[string | null, string]>([
    ["agent:main:discord:direct:user1", "dm"],
    ["agent:main:discord:dm:user1", "dm"],
    ["agent:main:telegram:group:g1", "group"],
    ["agent:main:discord:channel:c1", "channel"],
    ["telegram:dm:123456", "dm"],
    ["discord:acc-1:guild-123:channel-456", "channel"],
    ["agent:main:discord:acc-1:guild-123:channel-456", "channel"],
    ["discord:guild-123:channel-456", "channel"],
    ["12345-678@g.us", "group"],
    ["agent:main:12345-678@g.us", "group"],
    ["whatsapp:123@g.us", "group"],
    ["group:x", "group"],
    ["agent:main:dm:alice", "dm"],
    ["agent:main:telegram:tasks:dm:1", "dm"],
    ["agent:main:telegram:group:-100:topic:5", "group"],
    ["agent:main:slack:channel:c1:thread:1", "channel"],
    ["agent:main:dm:group", "dm"],
    ["AGENT:MAIN:DISCORD:GROUP:X", "group"],
    ["agent:main:cron:job:run:x", "unknown"],
    ["agent:main:subagent:x", "unknown"],
    ["agent:main:group", "unknown"],
    ["agent:main:main", "unknown"],
    ["agent:main", "unknown"],
    ["", "unknown"],
    [null, "unknown"],
  ])("chatTypeFromKey(%j) → %s", (key, expected) => {
    expect(chatTypeFromKey(key)).toBe(expected);
  });

  it.each<[Config, string, string, string | undefined]>([
    [DEFAULT, "agent:main:main", "main", undefined],
    [DEFAULT, "agent:ops:main", "main", undefined],
    [DEFAULT, "main", "main", undefined],
    [DEFAULT, "global", "main", undefined],
    [WORK_OPS, "agent:ops:work", "main", undefined],
    [WORK_OPS, "work", "main", undefined],
    [DEFAULT, "agent:main:cron:job-1", "cron", undefined],
    [DEFAULT, "cron:job-1", "cron", undefined],
    [DEFAULT, "agent:main:cron:abc:run:def", "cron", undefined],
    [DEFAULT, "agent:main:hook:webhook:42", "hook", undefined],
    [DEFAULT, "node-macbook", "node", undefined],
    [DEFAULT, "agent:main:node:x", "node", undefined],
    [DEFAULT, "agent:main:node-mac", "node", undefined],
    [DEFAULT, "agent:main:discord:group:dev", "group", undefined],
    [DEFAULT, "agent:main:discord:channel:c1", "group", undefined],
    [DEFAULT, "group:x", "group", undefined],
    [DEFAULT, "channel:x", "group", undefined],
    [DEFAULT, "agent:main:slack:channel:c1:thread:1", "group", undefined],
    [DEFAULT, "agent:main:telegram:group:-100:topic:9", "group", undefined],
    [DEFAULT, "agent:main:custom", "group", "group"],
    [DEFAULT, "agent:main:custom", "group", "channel"],
    [DEFAULT, "agent:main:custom", "other", "dm"],
    [DEFAULT, "agent:main:dm:alice", "other", undefined],
    [DEFAULT, "agent:main:telegram:dm:1", "other", undefined],
    [DEFAULT, "agent:main:subagent:x", "other", undefined],
    [DEFAULT, "agent:main:mysession", "other", undefined],
    [DEFAULT, "agent:main:main:thread:5", "other", undefined],
    [DEFAULT, "unknown", "other", undefined],
  ])("sessionKindFromKey(%#, %j) → %s", (config, key, expected, chatType) => {
    expect(sessionKindFromKey(config, key, { chatType })).toBe(expected);
  });

  it.each<[string, boolean, string | undefined]>([
    ["agent:main:slack:channel:c1:thread:1699999999.0001", true, "1699999999.0001"],
    ["agent:main:slack:channel:General:Thread:AbC", true, "AbC"],
    ["agent:main:telegram:group:-100123:topic:77", true, "77"],
    ["telegram:group:-1:topic:2", true, "2"],
    ["agent:main:telegram:dm:12345:thread:12345:99", true, "12345:99"],
    ["AGENT:MAIN:SLACK:CHANNEL:C1:THREAD:X", true, "X"],
    ["agent:main:feishu:group:oc_x:topic:abc", false, undefined],
    ["agent:main:telegram:topic:5", false, undefined],
    ["agent:main:discord:channel:c1", false, undefined],
    ["agent:main:slack:channel:c1:thread:", false, undefined],
    ["agent:main:main", false, undefined],
  ])("isThreadSessionKey(%j) === %s, threadId %j", (key, isThread, threadId) => {
    expect(isThreadSessionKey(key)).toBe(isThread);
    expect(threadIdFromKey(key)).toBe(threadId);
  });

  it.each<[string, string | undefined]>([
    ["agent:main:discord:group:dev", "discord"],
    ["agent:main:discord:channel:c1", "discord"],
    ["agent:main:telegram:dm:123", "telegram"],
    ["agent:main:telegram:tasks:dm:123", "telegram"],
    ["agent:main:telegram:tasks:direct:123", "telegram"],
    ["demo-channel:group:dev", "demo-channel"],
    ["agent:main:slack:channel:c1:thread:1", "slack"],
    ["agent:main:telegram:group:-100:topic:5", "telegram"],
    ["agent:main:main", undefined],
    ["agent:main:dm:alice", undefined],
    ["agent:main:cron:job-1", undefined],
    ["agent:main:subagent:x", undefined],
    ["agent:main:hook:channel:x", undefined],
    ["agent:main:a:b:group:x", undefined],
    ["", undefined],
  ])("channelFromKey(%j) → %j", (key, expected) => {
    expect(channelFromKey(key)).toBe(expected);
  });

  it.each<[string, Record<string, string> | undefined]>([
    ["agent:main:discord:group:dev", { channel: "discord", to: "group:dev" }],
    ["agent:main:telegram:group:-100123:topic:99", { channel: "telegram", to: "-100123", threadId: "99" }],
    [
      "agent:main:slack:channel:general:thread:1699999999.0001",
      { channel: "slack", to: "channel:general", threadId: "1699999999.0001" },
    ],
    ["agent:a:telegram:dm:123", { channel: "telegram", to: "123" }],
    ["agent:main:telegram:group:-100123", { channel: "telegram", to: "-100123" }],
    ["agent:main:discord:channel:1468834856187203680", { channel: "discord", to: "channel:1468834856187203680" }],
    ["agent:main:whatsapp:group:123@g.us", { channel: "whatsapp", to: "group:123@g.us" }],
    ["agent:main:telegram:tasks:dm:7550356539", { channel: "telegram", to: "7550356539", accountId: "tasks" }],
    [
      "agent:main:telegram:personal:dm:12345:thread:12345:99",
      { channel: "telegram", to: "12345", accountId: "personal", threadId: "12345:99" },
    ],
    ["agent:main:discord:dm:u1:thread:t1", { channel: "discord", to: "u1", threadId: "t1" }],
    ["agent:main:main", undefined],
    ["agent:main:main:thread:5", undefined],
    ["agent:main:dm:alice", undefined],
    ["agent:main:unknown:group:x", undefined],
    ["agent:main:cron:job-1", undefined],
    ["agent:main:subagent:x", undefined],
    ["agent:main:a:b:group:x", undefined],
    ["", undefined],
  ])("announceTargetFromKey(%j)", (key, expected) => {
    expect(announceTargetFromKey(key)).toStrictEqual(expected);
  });

  it.each<[string, number]>([
    ["agent:main:subagent:parent:subagent:child", 2],
    ["agent:main:subagent:x", 1],
    ["subagent:x", 1],
    ["AGENT:MAIN:SUBAGENT:X", 1],
    ["agent:main:main", 0],
    ["agent:main:subagentx:y", 0],
    ["", 0],
  ])("subagentDepthFromKey(%j) === %d", (key, depth) => {
    expect(subagentDepthFromKey(key)).toBe(depth);
    expect(isSubagentKey(key)).toBe(depth > 0);
  });

  it.each<[string, boolean]>([
    ["agent:main:cron:abc-123:run:def-456", true],
    ["cron:a:run:b", true],
    ["AGENT:MAIN:CRON:A:RUN:B", true],
    ["agent:main:cron:job-1", false],
    ["agent:main:cron:a:run:b:c", false],
    ["agent:main:hook:a:run:b", false],
    ["", false],
  ])("isCronRunKey(%j) === %s", (key, expected) => {
    expect(isCronRunKey(key)).toBe(expected);
  });
});
