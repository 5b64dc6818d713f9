/**
 * sendPolicy (docs/concepts/sessions.md, "Send policy"): override › rules › default, and the override parser.
 */
import { describe, expect, it } from "vitest";
import { parseConfig, type Config, type ConfigInput } from "../../src/config/index.js";
import { ValidationError } from "../../src/errors/index.js";
import { normalizeSendPolicyOverride, resolveSendPolicy, type SendPolicyContext } from "../../src/session/index.js";

type Rule = NonNullable<NonNullable<ConfigInput["session"]>["sendPolicy"]>["rules"];
const policy = (rules: Rule, dflt?: "allow" | "deny"): Config =>
  parseConfig({ session: { sendPolicy: { rules, ...(dflt ? { default: dflt } : {}) } } });

const NONE = parseConfig({});
const EMPTY_POLICY = policy([]);
const DENY_DEFAULT = policy([], "deny");
const DEMO_GROUP_DENY = policy([{ action: "deny", match: { channel: "demo-channel", chatType: "group" } }]);
const CRON_DENY = policy([{ action: "deny", match: { keyPrefix: "cron:" } }]);
const RAW_DENY = policy([{ action: "deny", match: { rawKeyPrefix: "agent:main:demo-channel:" } }]);
const RAW_BARE_DENY = policy([{ action: "deny", match: { rawKeyPrefix: "demo-channel:" } }]);
const DIRECT_DENY = policy([{ action: "deny", match: { chatType: "direct" } }]);
const DM_DENY = policy([{ action: "deny", match: { chatType: "dm" } }]);
const CHANNEL_TYPE_DENY = policy([{ action: "deny", match: { chatType: "channel" } }]);
const DISCORD_DENY = policy([{ action: "deny", match: { channel: "Discord" } }]);
const DENY_ALL = policy([{ action: "deny" }]);
const ALLOW_THEN_DENY = policy([
  { action: "allow", match: { channel: "discord" } },
  { action: "deny", match: { chatType: "group" } },
]);
const DENY_THEN_ALLOW = policy([
  { action: "deny", match: { chatType: "group" } },
  { action: "allow", match: { channel: "discord" } },
]);
const ALLOW_DISCORD_DEFAULT_DENY = policy([{ action: "allow", match: { channel: "discord" } }], "deny");
const BOTH_FIELDS = policy([{ action: "deny", match: { channel: "discord", keyPrefix: "cron:" } }]);
const UPPER_PREFIX = policy([{ action: "deny", match: { keyPrefix: "CRON:" } }]);
const DIRECT_PREFIX = policy([{ action: "deny", match: { keyPrefix: "agent:main:discord:direct:" } }]);
const STRIPPED_DIRECT_PREFIX = policy([{ action: "deny", match: { keyPrefix: "discord:direct:" } }]);

describe("resolveSendPolicy", () => {
  it.each<[label: string, config: Config, ctx: SendPolicyContext, expected: "allow" | "deny"]>([
    // no policy configured
    ["default allow without config", NONE, { sessionKey: "agent:main:main" }, "allow"],
    ["no config, group key", NONE, { sessionKey: "agent:main:discord:group:dev" }, "allow"],
    ["empty rules → default allow", EMPTY_POLICY, { sessionKey: "agent:main:main" }, "allow"],
    ["default deny", DENY_DEFAULT, { sessionKey: "agent:main:main" }, "deny"],
    // per-session override
    [
      "override deny beats default allow",
      EMPTY_POLICY,
      { sessionKey: "agent:main:main", entry: { sendPolicy: "deny" } },
      "deny",
    ],
    [
      "override deny without any config",
      NONE,
      { sessionKey: "agent:main:main", entry: { sendPolicy: "deny" } },
      "deny",
    ],
    ["override is case-insensitive", NONE, { sessionKey: "agent:main:main", entry: { sendPolicy: "DENY" } }, "deny"],
    [
      "override allow beats default deny",
      DENY_DEFAULT,
      { sessionKey: "agent:main:main", entry: { sendPolicy: " Allow " } },
      "allow",
    ],
    [
      "override allow beats a deny rule",
      DENY_ALL,
      { sessionKey: "agent:main:main", entry: { sendPolicy: "allow" } },
      "allow",
    ],
    ["override off = deny", NONE, { sessionKey: "agent:main:main", entry: { sendPolicy: "off" } }, "deny"],
    [
      "override inherit falls through",
      DENY_DEFAULT,
      { sessionKey: "agent:main:main", entry: { sendPolicy: "inherit" } },
      "deny",
    ],
    [
      "unreadable override ignored",
      DENY_ALL,
      { sessionKey: "agent:main:main", entry: { sendPolicy: "maybe" } },
      "deny",
    ],
    ["null override ignored", NONE, { sessionKey: "agent:main:main", entry: { sendPolicy: null } }, "allow"],
    // channel + chatType (OpenClaw's own test cases)
    [
      "demo group denied via entry chatType",
      DEMO_GROUP_DENY,
      { sessionKey: "demo-channel:group:dev", entry: { chatType: "group" } },
      "deny",
    ],
    ["demo group denied from key alone", DEMO_GROUP_DENY, { sessionKey: "demo-channel:group:dev" }, "deny"],
    ["demo group denied, agent key", DEMO_GROUP_DENY, { sessionKey: "agent:main:demo-channel:group:dev" }, "deny"],
    ["other channel group allowed", DEMO_GROUP_DENY, { sessionKey: "agent:main:other:group:dev" }, "allow"],
    ["demo DM allowed", DEMO_GROUP_DENY, { sessionKey: "agent:main:demo-channel:dm:1" }, "allow"],
    ["demo channel-room allowed", DEMO_GROUP_DENY, { sessionKey: "agent:main:demo-channel:channel:c1" }, "allow"],
    [
      "demo group on main key via params",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:main", channel: "demo-channel", chatType: "group" },
      "deny",
    ],
    [
      "demo group via entry channel",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:main", entry: { channel: "demo-channel", chatType: "group" } },
      "deny",
    ],
    [
      "demo group via entry lastChannel",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:x", entry: { lastChannel: "demo-channel", chatType: "group" } },
      "deny",
    ],
    [
      "param channel beats entry",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:x", channel: "slack", entry: { channel: "demo-channel", chatType: "group" } },
      "allow",
    ],
    [
      "entry channel beats key",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:demo-channel:group:dev", entry: { channel: "slack" } },
      "allow",
    ],
    [
      "param chatType beats entry",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:demo-channel:group:dev", chatType: "dm", entry: { chatType: "group" } },
      "allow",
    ],
    [
      "empty param falls through to key",
      DEMO_GROUP_DENY,
      { sessionKey: "agent:main:demo-channel:group:dev", channel: " ", chatType: "" },
      "deny",
    ],
    ["rule channel case-insensitive", DISCORD_DENY, { sessionKey: "agent:main:discord:group:dev" }, "deny"],
    ["param channel case-insensitive", DISCORD_DENY, { sessionKey: "agent:main:main", channel: "DISCORD" }, "deny"],
    ["channel rule needs a channel", DISCORD_DENY, { sessionKey: "agent:main:main" }, "allow"],
    ["per-account DM channel from key", DISCORD_DENY, { sessionKey: "agent:main:discord:acct:dm:1" }, "deny"],
    // dm ≡ direct
    ["direct rule matches dm key", DIRECT_DENY, { sessionKey: "agent:main:telegram:dm:1" }, "deny"],
    ["direct rule matches per-peer key", DIRECT_DENY, { sessionKey: "agent:main:dm:alice" }, "deny"],
    ["direct rule matches legacy direct key", DIRECT_DENY, { sessionKey: "agent:main:telegram:direct:1" }, "deny"],
    [
      "dm rule matches entry chatType direct",
      DM_DENY,
      { sessionKey: "agent:main:main", entry: { chatType: "direct" } },
      "deny",
    ],
    ["dm rule, group key", DM_DENY, { sessionKey: "agent:main:discord:group:dev" }, "allow"],
    ["chatType rule, unknown type", DIRECT_DENY, { sessionKey: "agent:main:main" }, "allow"],
    ["channel type is not group", CHANNEL_TYPE_DENY, { sessionKey: "agent:main:discord:group:dev" }, "allow"],
    ["channel type matches", CHANNEL_TYPE_DENY, { sessionKey: "agent:main:slack:channel:c1:thread:1" }, "deny"],
    // keyPrefix / rawKeyPrefix
    ["keyPrefix cron: denies bare cron key", CRON_DENY, { sessionKey: "cron:job-1" }, "deny"],
    ["keyPrefix cron: denies stored cron key", CRON_DENY, { sessionKey: "agent:main:cron:job-1" }, "deny"],
    ["keyPrefix cron: denies uppercase key", CRON_DENY, { sessionKey: "AGENT:MAIN:CRON:X" }, "deny"],
    ["keyPrefix cron: allows hooks", CRON_DENY, { sessionKey: "agent:main:hook:x" }, "allow"],
    ["keyPrefix compared lowercased", UPPER_PREFIX, { sessionKey: "agent:ops:cron:x" }, "deny"],
    ["rawKeyPrefix denies demo", RAW_DENY, { sessionKey: "agent:main:demo-channel:group:dev" }, "deny"],
    ["rawKeyPrefix allows other channel", RAW_DENY, { sessionKey: "agent:main:other-channel:group:dev" }, "allow"],
    ["rawKeyPrefix other agent", RAW_DENY, { sessionKey: "agent:ops:demo-channel:group:dev" }, "allow"],
    ["rawKeyPrefix is raw only", RAW_BARE_DENY, { sessionKey: "agent:main:demo-channel:group:dev" }, "allow"],
    ["rawKeyPrefix on a bare key", RAW_BARE_DENY, { sessionKey: "demo-channel:group:dev" }, "deny"],
    ["OpenClaw direct prefix matches dm key", DIRECT_PREFIX, { sessionKey: "agent:main:discord:dm:1" }, "deny"],
    [
      "stripped direct prefix matches dm key",
      STRIPPED_DIRECT_PREFIX,
      { sessionKey: "agent:main:discord:dm:1" },
      "deny",
    ],
    ["direct prefix, group key", DIRECT_PREFIX, { sessionKey: "agent:main:discord:group:1" }, "allow"],
    // rule combination
    ["every provided field must match", BOTH_FIELDS, { sessionKey: "agent:main:discord:group:x" }, "allow"],
    ["both fields match", BOTH_FIELDS, { sessionKey: "agent:main:cron:x", channel: "discord" }, "deny"],
    ["empty match matches everything", DENY_ALL, { sessionKey: "agent:main:main" }, "deny"],
    ["later deny beats earlier allow", ALLOW_THEN_DENY, { sessionKey: "agent:main:discord:group:dev" }, "deny"],
    ["first deny wins", DENY_THEN_ALLOW, { sessionKey: "agent:main:discord:group:dev" }, "deny"],
    ["allow without deny", ALLOW_THEN_DENY, { sessionKey: "agent:main:discord:channel:c1" }, "allow"],
    ["allow overrides default deny", ALLOW_DISCORD_DEFAULT_DENY, { sessionKey: "agent:main:discord:dm:1" }, "allow"],
    ["no allow → default deny", ALLOW_DISCORD_DEFAULT_DENY, { sessionKey: "agent:main:slack:dm:1" }, "deny"],
  ])("%s", (_label, config, ctx, expected) => {
    expect(resolveSendPolicy(config, ctx)).toBe(expected);
  });
});

describe("normalizeSendPolicyOverride (/send on|off|inherit, sessions.patch)", () => {
  it.each<[unknown, "allow" | "deny" | null]>([
    ["allow", "allow"],
    ["ALLOW", "allow"],
    ["on", "allow"],
    ["On", "allow"],
    ["deny", "deny"],
    [" Deny ", "deny"],
    ["off", "deny"],
    ["OFF", "deny"],
    ["inherit", null],
    ["default", null],
    ["reset", null],
    ["RESET", null],
    [null, null],
    [undefined, null],
  ])("%j → %j", (value, expected) => {
    expect(normalizeSendPolicyOverride(value)).toBe(expected);
  });

  it.each<[unknown]>([["maybe"], [""], ["yes"], ["allowed"], ["constructor"], [1], [true], [{}]])(
    "%j is refused",
    (value) => {
      let err: unknown;
      try {
        normalizeSendPolicyOverride(value);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).message).toBe('invalid sendPolicy (use "allow"|"deny")');
      expect((err as ValidationError).code).toBe("invalid_request");
    },
  );
});
