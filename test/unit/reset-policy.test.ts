import { describe, expect, it } from "vitest";
import { parseConfig, type ConfigInput } from "../../src/config/index.js";
import {
  hostTimeZone,
  resolveResetChannel,
  resolveResetPolicy,
  resolveResetType,
  type ResetPolicy,
  type ResetPolicyContext,
  type ResetType,
} from "../../src/session/reset-policy.js";

const HOST = hostTimeZone();
const cfg = (session: NonNullable<ConfigInput["session"]>) => parseConfig({ session });

const DM = "agent:main:telegram:dm:123";
const GROUP = "agent:main:telegram:group:g1";
const THREAD = "agent:main:slack:channel:c1:thread:1700000000.1";
const DISCORD_GROUP = "agent:main:discord:channel:c9";

describe("resolveResetType", () => {
  it.each<[string, ResetPolicyContext, ResetType]>([
    ["main key", { sessionKey: "agent:main:main" }, "dm"],
    ["per-peer dm", { sessionKey: "agent:main:dm:alice" }, "dm"],
    ["per-channel-peer dm", { sessionKey: DM }, "dm"],
    ["direct alias", { sessionKey: "agent:main:discord:direct:u1" }, "dm"],
    ["per-account dm", { sessionKey: "agent:main:telegram:acct1:dm:123" }, "dm"],
    ["group", { sessionKey: GROUP }, "group"],
    ["channel", { sessionKey: DISCORD_GROUP }, "group"],
    ["mixed case key", { sessionKey: "Agent:Main:Telegram:GROUP:G1" }, "group"],
    ["thread suffix", { sessionKey: THREAD }, "thread"],
    ["telegram topic", { sessionKey: "agent:main:telegram:group:-100123:topic:42" }, "thread"],
    // REFERENCE §1.5: only Telegram topics are threads; Feishu ids embed `:topic:` (same rule as isThreadSessionKey).
    ["feishu id with :topic: is a group", { sessionKey: "agent:main:feishu:group:oc_1:topic:om_2" }, "group"],
    ["feishu dm with :topic: is a dm", { sessionKey: "agent:main:feishu:dm:ou_1:topic:om_2" }, "dm"],
    [
      "feishu :topic: group with isThread",
      { sessionKey: "agent:main:feishu:group:oc_1:topic:om_2", isThread: true },
      "thread",
    ],
    [
      "feishu :topic: with a thread suffix",
      { sessionKey: "agent:main:feishu:group:oc_1:topic:om_2:thread:t1" },
      "thread",
    ],
    ["dm thread", { sessionKey: "agent:main:slack:dm:u1:thread:99" }, "thread"],
    ["isThread on a group key", { sessionKey: GROUP, isThread: true }, "thread"],
    ["isThread on a dm key", { sessionKey: DM, isThread: true }, "thread"],
    ["isThread false keeps group", { sessionKey: GROUP, isThread: false }, "group"],
    ["cron", { sessionKey: "agent:main:cron:nightly" }, "dm"],
    ["cron run", { sessionKey: "agent:main:cron:nightly:run:abc" }, "dm"],
    ["bare cron", { sessionKey: "cron:nightly" }, "dm"],
    ["cron even when isThread", { sessionKey: "agent:main:cron:job", isThread: true }, "dm"],
    ["hook", { sessionKey: "agent:main:hook:5f1c" }, "dm"],
    ["hook with group-like id", { sessionKey: "agent:main:hook:group:x" }, "dm"],
    ["subagent", { sessionKey: "agent:main:subagent:0b6f" }, "dm"],
    ["peer id named group is still dm", { sessionKey: "agent:main:telegram:dm:group" }, "dm"],
    ["dm peer, group word later", { sessionKey: "agent:main:matrix:dm:u:group:x" }, "dm"],
  ])("%s", (_name, ctx, expected) => {
    expect(resolveResetType(ctx)).toBe(expected);
  });
});

describe("resolveResetChannel", () => {
  it.each<[ResetPolicyContext, string | undefined]>([
    [{ sessionKey: DM }, "telegram"],
    [{ sessionKey: GROUP }, "telegram"],
    [{ sessionKey: DISCORD_GROUP }, "discord"],
    [{ sessionKey: "agent:main:discord:direct:u1" }, "discord"],
    [{ sessionKey: "agent:main:whatsapp:biz:dm:+491" }, "whatsapp"],
    [{ sessionKey: THREAD }, "slack"],
    [{ sessionKey: "agent:main:main" }, undefined],
    [{ sessionKey: "agent:main:dm:alice" }, undefined],
    [{ sessionKey: "agent:main:cron:nightly" }, undefined],
    [{ sessionKey: "agent:main:hook:abc" }, undefined],
    [{ sessionKey: "agent:main:subagent:abc" }, undefined],
    [{ sessionKey: "agent:main:main", channel: "Discord" }, "discord"],
    [{ sessionKey: GROUP, channel: "  SLACK " }, "slack"],
  ])("%j ⇒ %s", (ctx, expected) => {
    expect(resolveResetChannel(ctx)).toBe(expected);
  });
});

type Row = [name: string, session: NonNullable<ConfigInput["session"]>, ctx: ResetPolicyContext, expected: ResetPolicy];

describe("resolveResetPolicy precedence", () => {
  const full = {
    reset: { mode: "daily", atHour: 5, idleMinutes: 90, timezone: "Europe/Berlin" },
    resetByType: { group: { mode: "idle", idleMinutes: 30 }, thread: { atHour: 7 } },
    resetByChannel: { discord: { mode: "idle", idleMinutes: 10080 } },
    idleMinutes: 240,
  } as const;

  it.each<Row>([
    // defaults
    ["nothing configured ⇒ daily 04:00 host tz", {}, { sessionKey: DM }, { mode: "daily", atHour: 4, timezone: HOST }],
    ["nothing configured, group", {}, { sessionKey: GROUP }, { mode: "daily", atHour: 4, timezone: HOST }],

    // resetByChannel beats everything
    [
      "channel override beats reset+type+legacy (key-derived channel)",
      full,
      { sessionKey: DISCORD_GROUP },
      { mode: "idle", idleMinutes: 10080 },
    ],
    [
      "channel override beats all for a dm",
      full,
      { sessionKey: "agent:main:discord:dm:u1" },
      { mode: "idle", idleMinutes: 10080 },
    ],
    [
      "channel override via ctx.channel (case-insensitive)",
      full,
      { sessionKey: "agent:main:main", channel: "DISCORD" },
      { mode: "idle", idleMinutes: 10080 },
    ],
    [
      "channel override applies to threads too",
      full,
      { sessionKey: "agent:main:discord:channel:c1:thread:t1" },
      { mode: "idle", idleMinutes: 10080 },
    ],
    [
      "channel override ignores legacy idle and reset.idleMinutes in daily mode",
      { reset: { idleMinutes: 90 }, idleMinutes: 240, resetByChannel: { slack: { atHour: 6 } } },
      { sessionKey: THREAD },
      { mode: "daily", atHour: 6, timezone: HOST },
    ],
    [
      "channel override ignores resetByType",
      { resetByType: { thread: { mode: "off" } }, resetByChannel: { slack: { mode: "daily" } } },
      { sessionKey: THREAD },
      { mode: "daily", atHour: 4, timezone: HOST },
    ],
    [
      "channel override key written in capitals still matches",
      { resetByChannel: { Discord: { mode: "off" } } },
      { sessionKey: DISCORD_GROUP },
      { mode: "off" },
    ],
    [
      "channel override without timezone falls back to reset.timezone",
      { reset: { timezone: "Asia/Tokyo", atHour: 1 }, resetByChannel: { telegram: { atHour: 9 } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 9, timezone: "Asia/Tokyo" },
    ],
    [
      "channel override with its own timezone",
      { reset: { timezone: "Asia/Tokyo" }, resetByChannel: { telegram: { timezone: "America/New_York" } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 4, timezone: "America/New_York" },
    ],
    [
      "other channel is unaffected by the override",
      full,
      { sessionKey: DM },
      { mode: "daily", atHour: 5, idleMinutes: 90, timezone: "Europe/Berlin" },
    ],

    // resetByType beats reset, field by field
    ["type mode+idle over reset (group)", full, { sessionKey: GROUP }, { mode: "idle", idleMinutes: 30 }],
    [
      "type atHour only; mode/idle/tz from reset (thread)",
      full,
      { sessionKey: "agent:main:telegram:group:g1:topic:5" },
      { mode: "daily", atHour: 7, idleMinutes: 90, timezone: "Europe/Berlin" },
    ],
    [
      "type idleMinutes only keeps reset's mode and hour",
      { reset: { mode: "daily", atHour: 3 }, resetByType: { group: { idleMinutes: 15 } } },
      { sessionKey: GROUP },
      { mode: "daily", atHour: 3, idleMinutes: 15, timezone: HOST },
    ],
    [
      "type timezone beats reset timezone",
      { reset: { timezone: "Europe/Berlin" }, resetByType: { group: { timezone: "Asia/Kathmandu" } } },
      { sessionKey: GROUP },
      { mode: "daily", atHour: 4, timezone: "Asia/Kathmandu" },
    ],
    [
      "type idleMinutes 0 beats reset idleMinutes",
      { reset: { idleMinutes: 60 }, resetByType: { dm: { idleMinutes: 0 } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 4, idleMinutes: 0, timezone: HOST },
    ],

    // dm / direct alias
    [
      "resetByType.direct applies to dm keys",
      { resetByType: { direct: { mode: "idle", idleMinutes: 45 } } },
      { sessionKey: DM },
      { mode: "idle", idleMinutes: 45 },
    ],
    [
      "resetByType.dm applies to dm keys",
      { resetByType: { dm: { mode: "idle", idleMinutes: 50 } } },
      { sessionKey: "agent:main:main" },
      { mode: "idle", idleMinutes: 50 },
    ],
    [
      "dm wins over direct when both are set (whole entry, not merged)",
      { resetByType: { dm: { atHour: 8 }, direct: { mode: "idle", idleMinutes: 5 } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 8, timezone: HOST },
    ],
    [
      "cron keys use the dm entry",
      { resetByType: { dm: { mode: "off" }, thread: { mode: "idle" } } },
      { sessionKey: "agent:main:cron:job", isThread: true },
      { mode: "off" },
    ],
    [
      "direct entry does not leak to groups",
      { resetByType: { direct: { mode: "off" } } },
      { sessionKey: GROUP },
      { mode: "daily", atHour: 4, timezone: HOST },
    ],

    // legacy idleMinutes
    ["legacy idle alone ⇒ idle only", { idleMinutes: 240 }, { sessionKey: DM }, { mode: "idle", idleMinutes: 240 }],
    [
      "legacy idle alone for groups too",
      { idleMinutes: 240 },
      { sessionKey: GROUP },
      { mode: "idle", idleMinutes: 240 },
    ],
    [
      "legacy idle 0 alone ⇒ idle that never expires",
      { idleMinutes: 0 },
      { sessionKey: DM },
      { mode: "idle", idleMinutes: 0 },
    ],
    [
      "legacy idle with reset ⇒ daily + extra idle",
      { idleMinutes: 240, reset: { atHour: 2 } },
      { sessionKey: DM },
      { mode: "daily", atHour: 2, idleMinutes: 240, timezone: HOST },
    ],
    [
      "reset.idleMinutes beats legacy",
      { idleMinutes: 240, reset: { idleMinutes: 10 } },
      { sessionKey: DM },
      { mode: "daily", atHour: 4, idleMinutes: 10, timezone: HOST },
    ],
    [
      "legacy idle with resetByType only ⇒ daily for other types, legacy idle still applies",
      { idleMinutes: 240, resetByType: { group: { mode: "idle", idleMinutes: 20 } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 4, idleMinutes: 240, timezone: HOST },
    ],

    // resetByType alone
    [
      "resetByType alone ⇒ daily 04:00 for other types",
      { resetByType: { group: { mode: "idle", idleMinutes: 20 } } },
      { sessionKey: DM },
      { mode: "daily", atHour: 4, timezone: HOST },
    ],
    [
      "resetByType alone ⇒ its own type",
      { resetByType: { group: { mode: "idle", idleMinutes: 20 } } },
      { sessionKey: GROUP },
      { mode: "idle", idleMinutes: 20 },
    ],

    // idle mode without minutes, daily with idle
    [
      "idle mode without minutes ⇒ idleMinutes 0",
      { reset: { mode: "idle" } },
      { sessionKey: DM },
      { mode: "idle", idleMinutes: 0 },
    ],
    [
      "daily with idle extra expiry",
      { reset: { mode: "daily", atHour: 23, idleMinutes: 120 } },
      { sessionKey: DM },
      { mode: "daily", atHour: 23, idleMinutes: 120, timezone: HOST },
    ],
    ["atHour 0 is kept", { reset: { atHour: 0 } }, { sessionKey: DM }, { mode: "daily", atHour: 0, timezone: HOST }],

    // off
    [
      "reset off ⇒ off, idle ignored",
      { reset: { mode: "off", idleMinutes: 30 }, idleMinutes: 60 },
      { sessionKey: DM },
      { mode: "off" },
    ],
    [
      "reset off but type re-enables idle",
      { reset: { mode: "off" }, resetByType: { group: { mode: "idle", idleMinutes: 30 } } },
      { sessionKey: GROUP },
      { mode: "idle", idleMinutes: 30 },
    ],
    [
      "a feishu :topic: group takes resetByType.group, not thread",
      { resetByType: { group: { mode: "idle", idleMinutes: 30 }, thread: { mode: "off" } } },
      { sessionKey: "agent:main:feishu:group:oc_1:topic:om_2" },
      { mode: "idle", idleMinutes: 30 },
    ],
    [
      "type off over daily reset",
      { reset: { mode: "daily", idleMinutes: 30 }, resetByType: { thread: { mode: "off" } } },
      { sessionKey: THREAD },
      { mode: "off" },
    ],
    [
      "channel off over everything",
      { reset: { mode: "idle", idleMinutes: 5 }, resetByChannel: { telegram: { mode: "off" } } },
      { sessionKey: GROUP },
      { mode: "off" },
    ],
  ])("%s", (_name, session, ctx, expected) => {
    expect(resolveResetPolicy(cfg(session), ctx)).toStrictEqual(expected);
  });
});

describe("resolveResetPolicy timezone", () => {
  it("uses the host time zone when nothing is configured", () => {
    expect(HOST).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC");
    expect(resolveResetPolicy(cfg({}), { sessionKey: DM }).timezone).toBe(HOST);
  });

  it("rejects an unknown zone at config time", () => {
    expect(() => cfg({ reset: { timezone: "Mars/Olympus" } })).toThrow();
  });
});
