/**
 * Property tests (fast-check) for the pure session logic: what must hold for every input, not
 * only for the table cases. Key building and parsing round trips, the daily boundary around any
 * instant in any zone and across daylight-saving changes, freshness and reset-policy precedence,
 * sendPolicy rule matching, credential redaction (every family) and hand-off sanitising.
 * PROPERTY_RUNS raises the number of cases per property (default 300).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { canonicalSessionKey } from "../../src/session/key-canonical.js";
import { resolveInboundSession, threadSessionKey } from "../../src/session/key-build.js";
import { agentIdFromSessionKey, parseAgentSessionKey, parseThreadSuffix } from "../../src/session/key-parse.js";
import { evaluateFreshness, mostRecentDailyBoundary, nextDailyBoundary, staleAt } from "../../src/session/freshness.js";
import { redactSecrets } from "../../src/history/redact.js";
import { sanitizeForHandoff } from "../../src/history/handoff.js";
import { resolveSendPolicy, type SendPolicyContext } from "../../src/session/send-policy.js";
import { channelFromKey, chatTypeFromKey } from "../../src/session/key-classify.js";
import { resolveResetPolicy } from "../../src/session/reset-policy.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 300);
const idChars = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789_-".split(""));
const agentId = fc
  .tuple(
    fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789".split("")),
    fc.string({ unit: idChars, maxLength: 20 }),
  )
  .map(([a, b]) => a + b);
/** Peer and group ids as channels send them: mixed case, digits, punctuation, no separators. */
const peerId = fc
  .string({ unit: fc.constantFrom(..."abcXYZ0189+@._-".split("")), minLength: 1, maxLength: 24 })
  .filter((s) => s.trim() === s && s.length > 0);
const channel = fc.constantFrom("telegram", "whatsapp", "discord", "slack", "web", "signal");
const dmScope = fc.constantFrom("main", "per-peer", "per-channel-peer", "per-account-channel-peer");

describe("session keys", () => {
  it("an inbound message's key is canonical, belongs to its agent, and canonicalising it again changes nothing", () => {
    fc.assert(
      fc.property(
        agentId,
        channel,
        peerId,
        fc.option(peerId, { nil: undefined }),
        fc.constantFrom("dm", "group", "channel") as fc.Arbitrary<"dm" | "group" | "channel">,
        dmScope,
        (agent, ch, from, groupId, chatType, scope) => {
          const config = parseConfig({ session: { dmScope: scope }, agents: { list: [{ id: agent, default: true }] } });
          const msg = {
            channel: ch,
            chatType,
            from,
            agentId: agent,
            ...(chatType !== "dm" ? { groupId: groupId ?? from } : {}),
          };
          const { sessionKey, agentId: resolved } = resolveInboundSession(config, msg);
          expect(resolved).toBe(agent);
          expect(sessionKey).toBe(sessionKey.toLowerCase());
          expect(canonicalSessionKey(config, sessionKey)).toBe(sessionKey);
          expect(parseAgentSessionKey(sessionKey)?.agentId).toBe(agent);
          expect(agentIdFromSessionKey(sessionKey, "fallback")).toBe(agent);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("a thread suffix splits back into its base key and thread id", () => {
    fc.assert(
      fc.property(agentId, peerId, fc.oneof(peerId, fc.integer({ min: 0, max: 2 ** 40 })), (agent, group, thread) => {
        const base = `agent:${agent}:slack:channel:${group.toLowerCase()}`;
        const key = threadSessionKey(base, thread);
        const split = parseThreadSuffix(key);
        expect(split.baseSessionKey).toBe(base);
        expect(split.threadId?.toLowerCase()).toBe(String(thread).toLowerCase());
      }),
      { numRuns: RUNS },
    );
  });
});

describe("the daily boundary", () => {
  const zone = fc.constantFrom(
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Pacific/Chatham",
  );
  // 2020–2035, where every zone above changes its offset at least once a year or not at all.
  const instant = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2035, 0, 1) });

  it("the last boundary is at or before now and the next one after it, less than ~25 h apart", () => {
    fc.assert(
      fc.property(instant, fc.integer({ min: 0, max: 23 }), zone, (now, atHour, tz) => {
        const prev = mostRecentDailyBoundary(now, atHour, tz);
        const next = nextDailyBoundary(now, atHour, tz);
        expect(prev).toBeLessThanOrEqual(now);
        expect(next).toBeGreaterThan(now);
        expect(next - prev).toBeLessThanOrEqual(25 * 3600_000);
      }),
      { numRuns: RUNS },
    );
  });

  it("a session is fresh exactly when it was updated at or after the last boundary", () => {
    fc.assert(
      fc.property(
        instant,
        fc.integer({ min: 0, max: 3 * 86_400_000 }),
        fc.integer({ min: 0, max: 23 }),
        zone,
        (now, age, atHour, tz) => {
          const updatedAt = now - age;
          const f = evaluateFreshness({ updatedAt, now, policy: { mode: "daily", atHour, timezone: tz } });
          expect(f.fresh).toBe(updatedAt >= mostRecentDailyBoundary(now, atHour, tz));
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("credential redaction", () => {
  const token = fc.oneof(
    fc
      .string({ unit: fc.constantFrom(..."abcdefghijkLMNOP0123456789_-".split("")), minLength: 20, maxLength: 60 })
      .map((s) => `sk-${s}`),
    fc
      .string({ unit: fc.constantFrom(..."abcdefXYZ0123456789".split("")), minLength: 36, maxLength: 40 })
      .map((s) => `ghp_${s}`),
    fc
      .string({ unit: fc.constantFrom(..."abcdefXYZ0123456789".split("")), minLength: 20, maxLength: 40 })
      .map((s) => `OPENAI_API_KEY=${s}`),
  );
  const prose = fc.string({ maxLength: 80 });

  it("is idempotent, never makes text longer, and leaves no token it was built to find", () => {
    fc.assert(
      fc.property(prose, token, prose, (before, secret, after) => {
        const text = `${before} ${secret} ${after}`;
        const once = redactSecrets(text);
        expect(once.redacted).toBe(true);
        expect(once.text.length).toBeLessThanOrEqual(text.length);
        expect(redactSecrets(once.text).text).toBe(once.text);
        expect(once.text).not.toMatch(
          /\bsk-[A-Za-z0-9_-]{8,}\b|\bghp_[A-Za-z0-9]{20,}\b|OPENAI_API_KEY=[A-Za-z0-9]{8,}/,
        );
      }),
      { numRuns: RUNS },
    );
  });
});

describe("text handed to another agent or a channel", () => {
  const piece = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom(
      "<think>plan</think>",
      "<thinking>x</thinking>",
      "NO_REPLY",
      "```code```",
      "<tool_call>{}</tool_call>",
      "\n",
      " ",
    ),
  );
  it("sanitising is idempotent and never makes text longer", () => {
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 8 }).map((a) => a.join("")),
        (text) => {
          const once = sanitizeForHandoff(text);
          expect(once.length).toBeLessThanOrEqual(text.length);
          expect(sanitizeForHandoff(once)).toBe(once);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// sendPolicy (docs/concepts/sessions.md, "Send policy"): the rules are a set, not a program. A
// matching deny denies wherever it stands, an allow only counts when no deny matches, and the
// default decides only when nothing matched. Properties compare one configuration with a changed
// one (shuffled, extended, recased), so they hold without restating how matching is done.

type Decision = "allow" | "deny";
type Match = { channel?: string; chatType?: string; keyPrefix?: string; rawKeyPrefix?: string };
type Rule = { action: Decision; match?: Match };

/** Small pools, so generated rules often match the generated sessions. */
const spAgent = fc.constantFrom("main", "ops");
const spChannel = fc.constantFrom("telegram", "discord", "slack");
const spPeer = fc.constantFrom("u1", "alice", "room-7", "42");

/** Keys as Switchboard builds them: chat keys with and without an account, per-peer DMs, main, cron. */
const spKey = fc.oneof(
  fc
    .tuple(spAgent, spChannel, fc.constantFrom("dm", "group", "channel"), spPeer)
    .map(([a, c, k, p]) => `agent:${a}:${c}:${k}:${p}`),
  fc
    .tuple(spAgent, spChannel, fc.constantFrom("acct1", "work"), spPeer)
    .map(([a, c, acct, p]) => `agent:${a}:${c}:${acct}:dm:${p}`),
  fc.tuple(spAgent, spPeer).map(([a, p]) => `agent:${a}:dm:${p}`),
  spAgent.map((a) => `agent:${a}:main`),
  fc.tuple(spAgent, spPeer).map(([a, p]) => `agent:${a}:cron:${p}`),
);
const spPrefix = fc.constantFrom(
  "cron:",
  "agent:",
  "agent:main:",
  "agent:ops:cron:",
  "discord:",
  "telegram:dm:",
  "slack:group:",
  "dm:",
  "agent:main:discord:direct:",
  "telegram:acct1:",
);
const spMatch: fc.Arbitrary<Match> = fc.record(
  {
    channel: spChannel,
    chatType: fc.constantFrom("dm", "direct", "group", "channel"),
    keyPrefix: spPrefix,
    rawKeyPrefix: spPrefix,
  },
  { requiredKeys: [] },
);
const spRule: fc.Arbitrary<Rule> = fc.record(
  { action: fc.constantFrom<Decision>("allow", "deny"), match: spMatch },
  { requiredKeys: ["action"] },
);
const spRules = fc.array(spRule, { maxLength: 6 });
const spDefault = fc.option(fc.constantFrom<Decision>("allow", "deny"), { nil: undefined });
/** The message's own channel and chat type, when the caller knows them. */
const spCtxExtra = fc.record(
  { channel: spChannel, chatType: fc.constantFrom("dm", "direct", "group", "channel") },
  { requiredKeys: [] },
);

function sendConfig(rules: Rule[], dflt?: Decision) {
  return parseConfig({ session: { sendPolicy: { rules, ...(dflt ? { default: dflt } : {}) } } });
}
function decide(rules: Rule[], dflt: Decision | undefined, ctx: SendPolicyContext): Decision {
  return resolveSendPolicy(sendConfig(rules, dflt), ctx);
}

/** The facts a rule can name, as the session presents them (message › key): a rule built from them matches. */
const matchingRule = (
  action: Decision,
  key: string,
  extra: { channel?: string; chatType?: string },
): fc.Arbitrary<Rule> => {
  const rest = key.split(":").slice(2).join(":");
  const channel = extra.channel ?? channelFromKey(key);
  const chatType = extra.chatType ?? chatTypeFromKey(key);
  return fc
    .record(
      {
        channel: channel ? fc.constant(channel) : fc.constant(undefined),
        chatType: chatType !== "unknown" ? fc.constant(chatType) : fc.constant(undefined),
        keyPrefix: fc.oneof(
          fc.integer({ min: 1, max: key.length }).map((n) => key.slice(0, n)),
          fc.integer({ min: 1, max: rest.length }).map((n) => rest.slice(0, n)),
        ),
        rawKeyPrefix: fc.integer({ min: 1, max: key.length }).map((n) => key.slice(0, n)),
      },
      { requiredKeys: [] },
    )
    .map((m) => ({ action, match: Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as Match }));
};

describe("sendPolicy rule matching", () => {
  it("the session's own override decides, whatever the rules and default say", () => {
    const word = fc.constantFrom<[string, Decision]>(
      ["allow", "allow"],
      ["on", "allow"],
      [" ALLOW ", "allow"],
      ["deny", "deny"],
      ["Off", "deny"],
      ["DENY", "deny"],
    );
    fc.assert(
      fc.property(spRules, spDefault, spKey, spCtxExtra, word, (rules, dflt, sessionKey, extra, [w, expected]) => {
        expect(decide(rules, dflt, { sessionKey, ...extra, entry: { sendPolicy: w } })).toBe(expected);
      }),
      { numRuns: RUNS },
    );
  });

  it("without a sendPolicy every session may send, and a cleared override (inherit) changes nothing", () => {
    fc.assert(
      fc.property(
        spKey,
        spCtxExtra,
        fc.constantFrom(undefined, null, "inherit", "default", "reset"),
        (sessionKey, extra, cleared) => {
          expect(resolveSendPolicy(parseConfig({}), { sessionKey, ...extra, entry: { sendPolicy: cleared } })).toBe(
            "allow",
          );
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("the order of the rules does not matter", () => {
    fc.assert(
      fc.property(
        spRules.chain((r) =>
          fc.tuple(fc.constant(r), fc.shuffledSubarray(r, { minLength: r.length, maxLength: r.length })),
        ),
        spDefault,
        spKey,
        spCtxExtra,
        ([rules, shuffled], dflt, sessionKey, extra) => {
          expect(decide(shuffled, dflt, { sessionKey, ...extra })).toBe(decide(rules, dflt, { sessionKey, ...extra }));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("a deny rule that matches the session denies, wherever it stands", () => {
    const arb = fc
      .tuple(spKey, spCtxExtra)
      .chain(([key, extra]) =>
        fc.tuple(fc.constant(key), fc.constant(extra), matchingRule("deny", key, extra), spRules, fc.nat()),
      );
    fc.assert(
      fc.property(arb, spDefault, ([sessionKey, extra, deny, rules, at], dflt) => {
        const withDeny = [...rules.slice(0, at % (rules.length + 1)), deny, ...rules.slice(at % (rules.length + 1))];
        expect(decide(withDeny, dflt, { sessionKey, ...extra })).toBe("deny");
      }),
      { numRuns: RUNS },
    );
  });

  it("a matching allow rule allows unless a deny rule matches too; the default is then never consulted", () => {
    const arb = fc
      .tuple(spKey, spCtxExtra)
      .chain(([key, extra]) =>
        fc.tuple(fc.constant(key), fc.constant(extra), matchingRule("allow", key, extra), spRules),
      );
    fc.assert(
      fc.property(arb, spDefault, ([sessionKey, extra, allow, rules], dflt) => {
        const ctx = { sessionKey, ...extra };
        // Whether some deny matches, asked of the policy itself: the deny rules alone over a default of allow.
        const denied =
          decide(
            rules.filter((r) => r.action === "deny"),
            "allow",
            ctx,
          ) === "deny";
        const expected: Decision = denied ? "deny" : "allow";
        expect(decide([...rules, allow], dflt, ctx)).toBe(expected);
        expect(decide([allow, ...rules], "deny", ctx)).toBe(expected);
      }),
      { numRuns: RUNS },
    );
  });

  it("when no rule matches, the configured default decides (allow when unset)", () => {
    // A channel no session here uses: a rule naming it can never match.
    const unmatched = fc.array(
      fc.record({
        action: fc.constantFrom<Decision>("allow", "deny"),
        match: spMatch.map((m) => ({ ...m, channel: "nowhere" })),
      }),
      { maxLength: 5 },
    );
    fc.assert(
      fc.property(unmatched, spDefault, spKey, spCtxExtra, (rules, dflt, sessionKey, extra) => {
        expect(decide(rules, dflt, { sessionKey, ...extra })).toBe(dflt ?? "allow");
      }),
      { numRuns: RUNS },
    );
  });

  it("keys, channels and prefixes compare case-insensitively, and chat type dm is the same as direct", () => {
    const swapDm = (t: string | undefined) => (t === "dm" ? "direct" : t === "direct" ? "dm" : t);
    fc.assert(
      fc.property(spRules, spDefault, spKey, spCtxExtra, (rules, dflt, sessionKey, extra) => {
        const want = decide(rules, dflt, { sessionKey, ...extra });
        const upper = rules.map((r) => ({
          action: r.action,
          match: Object.fromEntries(
            Object.entries(r.match ?? {}).map(([k, v]) => [k, k === "chatType" ? v : v.toUpperCase()]),
          ),
        }));
        const upperCtx = {
          sessionKey: sessionKey.toUpperCase(),
          ...(extra.channel ? { channel: extra.channel.toUpperCase() } : {}),
          ...(extra.chatType ? { chatType: extra.chatType.toUpperCase() } : {}),
        };
        expect(decide(upper, dflt, upperCtx)).toBe(want);
        const swapped = rules.map((r) => ({
          action: r.action,
          match: { ...r.match, ...(r.match?.chatType ? { chatType: swapDm(r.match.chatType) } : {}) },
        }));
        const swappedCtx = { sessionKey, ...extra, ...(extra.chatType ? { chatType: swapDm(extra.chatType) } : {}) };
        expect(decide(swapped, dflt, swappedCtx)).toBe(want);
      }),
      { numRuns: RUNS },
    );
  });

  it("a prefix written with OpenClaw's `direct` segment matches the same sessions as one with `dm`", () => {
    fc.assert(
      fc.property(spRules, spDefault, spKey, spCtxExtra, (rules, dflt, sessionKey, extra) => {
        const toDm = (p: string | undefined) => p?.replace(/(^|:)direct(?=:|$)/g, "$1dm");
        const dmRules = rules.map((r) => ({
          action: r.action,
          match: {
            ...r.match,
            ...(r.match?.keyPrefix ? { keyPrefix: toDm(r.match.keyPrefix) } : {}),
            ...(r.match?.rawKeyPrefix ? { rawKeyPrefix: toDm(r.match.rawKeyPrefix) } : {}),
          },
        }));
        expect(decide(dmRules, dflt, { sessionKey, ...extra })).toBe(decide(rules, dflt, { sessionKey, ...extra }));
      }),
      { numRuns: RUNS },
    );
  });

  it("the channel comes from the message, else the session entry, else the key", () => {
    const other = (c: string) => (c === "discord" ? "slack" : "discord");
    fc.assert(
      fc.property(spKey, spChannel, fc.boolean(), (sessionKey, ch, viaLast) => {
        const rules: Rule[] = [{ action: "deny", match: { channel: ch } }];
        const entryWith = (c: string) => (viaLast ? { lastChannel: c } : { channel: c });
        // The message's channel wins over the entry's.
        expect(decide(rules, undefined, { sessionKey, channel: ch, entry: entryWith(other(ch)) })).toBe("deny");
        expect(decide(rules, undefined, { sessionKey, channel: other(ch), entry: entryWith(ch) })).toBe("allow");
        // Without one, the entry's wins over the key's.
        expect(decide(rules, undefined, { sessionKey, entry: entryWith(ch) })).toBe("deny");
        expect(decide(rules, undefined, { sessionKey, entry: entryWith(other(ch)) })).toBe("allow");
        // Without either, the key's own channel segment (none for main, per-peer and cron keys).
        expect(decide(rules, undefined, { sessionKey })).toBe(channelFromKey(sessionKey) === ch ? "deny" : "allow");
      }),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Freshness across daylight-saving changes (docs/concepts/sessions.md, "Freshness"). Instants
// are drawn from the 48 hours around real transitions, computed from the zones' published rules
// (EU: last Sunday of March and October at 01:00 UTC; US: second Sunday of March at 02:00 EST,
// first Sunday of November at 02:00 EDT), and the local clock is read with Intl as an oracle.

const HOUR = 3600_000;
function nthSundayUtc(year: number, month: number, n: number): number {
  const first = new Date(Date.UTC(year, month - 1, 1)).getUTCDay();
  return 1 + ((7 - first) % 7) + 7 * (n - 1);
}
function lastSundayUtc(year: number, month: number): number {
  const last = new Date(Date.UTC(year, month, 0));
  return last.getUTCDate() - last.getUTCDay();
}
/** The instants at which `zone` changes its offset in `year`. */
function dstTransitions(zone: "Europe/Berlin" | "America/New_York", year: number): number[] {
  if (zone === "Europe/Berlin")
    return [Date.UTC(year, 2, lastSundayUtc(year, 3), 1), Date.UTC(year, 9, lastSundayUtc(year, 10), 1)];
  return [Date.UTC(year, 2, nthSundayUtc(year, 3, 2), 7), Date.UTC(year, 10, nthSundayUtc(year, 11, 1), 6)];
}

const wallFormats = new Map<string, Intl.DateTimeFormat>();
/** The local calendar date and clock reading of instant `t` in `zone` (to the second). */
function wall(t: number, zone: string): { date: string; clock: string } {
  let f = wallFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    });
    wallFormats.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(t)).map((x) => [x.type, x.value]));
  return { date: `${p.year}-${p.month}-${p.day}`, clock: `${p.hour === "24" ? "00" : p.hour}:${p.minute}:${p.second}` };
}
const clockOf = (h: number) => `${String(h).padStart(2, "0")}:00:00`;
const dayAfter = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);

const dstZone = fc.constantFrom<"Europe/Berlin" | "America/New_York">("Europe/Berlin", "America/New_York");
/** An instant within ±48 h of one of the zone's transitions between 2020 and 2035. */
const nearDst = fc
  .record({
    zone: dstZone,
    year: fc.integer({ min: 2020, max: 2035 }),
    which: fc.integer({ min: 0, max: 1 }),
    delta: fc.integer({ min: -48 * HOUR, max: 48 * HOUR }),
  })
  .map(({ zone, year, which, delta }) => ({ zone, at: dstTransitions(zone, year)[which]! + delta }));
const atHourArb = fc.integer({ min: 0, max: 23 });

describe("freshness across daylight-saving changes", () => {
  it("the transitions the generators use are real ones (the local offset changes there)", () => {
    for (const zone of ["Europe/Berlin", "America/New_York"] as const) {
      for (let year = 2020; year <= 2035; year++) {
        for (const t of dstTransitions(zone, year)) {
          // One hour of real time either side moves the local clock by 0 or 2 hours, never 1.
          const before = Date.parse(`${wall(t - HOUR, zone).date}T${wall(t - HOUR, zone).clock}Z`);
          const after = Date.parse(`${wall(t + HOUR, zone).date}T${wall(t + HOUR, zone).clock}Z`);
          expect(Math.abs(after - before - 2 * HOUR) === HOUR, `${zone} ${new Date(t).toISOString()}`).toBe(true);
        }
      }
    }
  });

  it("the daily boundary is the first instant of its local day whose clock reads atHour:00 or later", () => {
    fc.assert(
      fc.property(nearDst, atHourArb, ({ zone, at }, atHour) => {
        const b = mostRecentDailyBoundary(at, atHour, zone);
        const here = wall(b, zone);
        const justBefore = wall(b - 1, zone);
        expect(here.clock >= clockOf(atHour)).toBe(true);
        expect(justBefore.date < here.date || justBefore.clock < clockOf(atHour)).toBe(true);
        // Only a spring-forward gap moves the boundary off atHour:00 exactly: it is then the end of the gap.
        if (here.clock !== clockOf(atHour)) expect(dstTransitions(zone, new Date(b).getUTCFullYear())).toContain(b);
      }),
      { numRuns: RUNS },
    );
  });

  it("consecutive boundaries fall on consecutive local days, 23, 24 or 25 hours apart", () => {
    fc.assert(
      fc.property(nearDst, atHourArb, ({ zone, at }, atHour) => {
        const prev = mostRecentDailyBoundary(at, atHour, zone);
        const next = nextDailyBoundary(prev, atHour, zone);
        expect(nextDailyBoundary(at, atHour, zone)).toBe(next);
        expect(wall(next, zone).date).toBe(dayAfter(wall(prev, zone).date));
        expect([23 * HOUR, 24 * HOUR, 25 * HOUR]).toContain(next - prev);
      }),
      { numRuns: RUNS },
    );
  });

  it("a session touched at the boundary is fresh until the next one; a millisecond earlier it is stale (daily)", () => {
    fc.assert(
      fc.property(nearDst, atHourArb, fc.double({ min: 0, max: 1, noNaN: true }), ({ zone, at }, atHour, frac) => {
        const policy = { mode: "daily" as const, atHour, timezone: zone };
        const b = mostRecentDailyBoundary(at, atHour, zone);
        const next = nextDailyBoundary(b, atHour, zone);
        const now = b + Math.floor(frac * (next - b - 1)); // anywhere in [b, next)
        expect(evaluateFreshness({ updatedAt: b, now, policy }).fresh).toBe(true);
        expect(evaluateFreshness({ updatedAt: b, now: next, policy })).toMatchObject({
          fresh: false,
          staleReason: "daily",
        });
        expect(evaluateFreshness({ updatedAt: b - 1, now, policy })).toMatchObject({
          fresh: false,
          staleReason: "daily",
        });
      }),
      { numRuns: RUNS },
    );
  });

  it("idle expiry counts elapsed time, not the wall clock: a DST jump neither adds nor removes an hour", () => {
    fc.assert(
      fc.property(
        nearDst,
        fc.integer({ min: 1, max: 6 * 60 }),
        fc.integer({ min: 0, max: 8 * HOUR }),
        ({ zone, at }, idleMinutes, elapsed) => {
          const f = evaluateFreshness({
            updatedAt: at,
            now: at + elapsed,
            policy: { mode: "idle", idleMinutes, timezone: zone },
          });
          expect(f.fresh).toBe(elapsed <= idleMinutes * 60_000);
          // Strictly after: at exactly idleMinutes it is still fresh, one millisecond later it is not.
          const edge = at + idleMinutes * 60_000;
          expect(
            evaluateFreshness({ updatedAt: at, now: edge, policy: { mode: "idle", idleMinutes, timezone: zone } })
              .fresh,
          ).toBe(true);
          expect(
            evaluateFreshness({ updatedAt: at, now: edge + 1, policy: { mode: "idle", idleMinutes, timezone: zone } })
              .staleReason,
          ).toBe("idle");
          expect(staleAt({ updatedAt: at, policy: { mode: "idle", idleMinutes } })).toBe(at + idleMinutes * 60_000 + 1);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("daily + idle: whichever expires first wins, idle names the reason when both do, stale stays stale", () => {
    const policyArb = fc.oneof(
      fc.record({
        mode: fc.constant("daily" as const),
        atHour: atHourArb,
        idleMinutes: fc.option(fc.integer({ min: 0, max: 48 * 60 }), { nil: undefined }),
      }),
      fc.record({ mode: fc.constant("idle" as const), idleMinutes: fc.integer({ min: 0, max: 48 * 60 }) }),
      fc.constant({ mode: "off" as const }),
    );
    fc.assert(
      fc.property(
        nearDst,
        policyArb,
        fc.integer({ min: 0, max: 3 * 86_400_000 }),
        fc.integer({ min: 0, max: 86_400_000 }),
        ({ zone, at }, p, age, later) => {
          const policy = { ...p, timezone: zone };
          const updatedAt = at - age;
          const f = evaluateFreshness({ updatedAt, now: at, policy });
          const until = staleAt({ updatedAt, policy });
          expect(f.fresh).toBe(until === undefined || at < until);
          if (policy.mode === "off") expect(f.fresh).toBe(true);
          const idle = "idleMinutes" in policy ? (policy.idleMinutes ?? 0) : 0;
          const idleStale = idle > 0 && at - updatedAt > idle * 60_000;
          if (idleStale) expect(f.staleReason).toBe("idle");
          if (!f.fresh) expect(evaluateFreshness({ updatedAt, now: at + later, policy }).fresh).toBe(false);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Which reset policy applies (docs/concepts/sessions.md, "Reset policy").

describe("reset policy resolution", () => {
  const policyCfg = fc.record(
    {
      mode: fc.constantFrom("daily", "idle", "off"),
      atHour: atHourArb,
      idleMinutes: fc.integer({ min: 0, max: 600 }),
      timezone: fc.constantFrom("UTC", "Europe/Berlin", "America/New_York"),
    },
    { requiredKeys: [] },
  );
  const sessionCfg = fc.record(
    {
      reset: policyCfg,
      resetByType: fc.record(
        { dm: policyCfg, direct: policyCfg, group: policyCfg, thread: policyCfg },
        { requiredKeys: [] },
      ),
      idleMinutes: fc.integer({ min: 0, max: 600 }),
    },
    { requiredKeys: [] },
  );

  it("a resetByChannel entry replaces everything else for its channel (only the deployment's zone backs it)", () => {
    fc.assert(
      fc.property(sessionCfg, policyCfg, spKey, spChannel, (session, byChannel, sessionKey, ch) => {
        const full = parseConfig({ session: { ...session, resetByChannel: { [ch]: byChannel } } });
        const zone = session.reset?.timezone;
        const alone = parseConfig({
          session: { resetByChannel: { [ch]: byChannel }, ...(zone ? { reset: { timezone: zone } } : {}) },
        });
        expect(resolveResetPolicy(full, { sessionKey, channel: ch })).toEqual(
          resolveResetPolicy(alone, { sessionKey, channel: ch }),
        );
      }),
      { numRuns: RUNS },
    );
  });

  it("every resolved policy is usable: daily has hour 0..23 and a zone, off has nothing, idle never negative", () => {
    fc.assert(
      fc.property(
        sessionCfg,
        spKey,
        fc.option(spChannel, { nil: undefined }),
        fc.boolean(),
        (session, sessionKey, channel, isThread) => {
          const p = resolveResetPolicy(parseConfig({ session }), {
            sessionKey,
            ...(channel ? { channel } : {}),
            isThread,
          });
          if (p.mode === "off") expect(p).toEqual({ mode: "off" });
          if (p.mode === "daily") {
            expect(Number.isInteger(p.atHour) && p.atHour! >= 0 && p.atHour! <= 23).toBe(true);
            expect(typeof p.timezone).toBe("string");
          }
          if (p.idleMinutes !== undefined) expect(p.idleMinutes).toBeGreaterThanOrEqual(0);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Every credential family redaction knows (src/history/redact.ts), not only the three above: the
// secret value never survives, a second pass changes nothing, and the text does not grow.

describe("credential redaction, every family", () => {
  const alnum = "abcdefghijkLMNOPQRSTUVWXYZ0123456789";
  /**
   * `min`..`max` characters from `chars`, the last one a letter or digit: the token patterns end
   * at a word boundary, so trailing dashes are not part of a match (a 20-character minimum met
   * only by counting a trailing `-` is not met). Real tokens are long enough that this never
   * leaves one unmasked; the properties are about tokens of the documented shapes.
   */
  const run = (chars: string, min: number, max: number) =>
    fc
      .tuple(
        fc.string({ unit: fc.constantFrom(...chars.split("")), minLength: min - 1, maxLength: max - 1 }),
        fc.constantFrom(..."aZ09".split("")),
      )
      .map(([body, last]) => body + last);
  /**
   * [text carrying the secret, the secret value itself]. Values have 3+ characters, PEM bodies 10+: see the last test.
   */
  const secret = fc.oneof<fc.Arbitrary<[string, string]>[]>(
    run(`${alnum}_-`, 8, 40).map((v) => [`sk-${v}`, `sk-${v}`]),
    run(alnum, 20, 40).map((v) => [`ghp_${v}`, `ghp_${v}`]),
    run(`${alnum}_`, 20, 40).map((v) => [`github_pat_${v}`, `github_pat_${v}`]),
    fc
      .tuple(fc.constantFrom("b", "a", "p", "r", "s"), run(`${alnum}-`, 10, 30))
      .map(([k, v]) => [`xox${k}-${v}`, `xox${k}-${v}`]),
    run(`${alnum}-`, 10, 30).map((v) => [`xapp-${v}`, `xapp-${v}`]),
    run(`${alnum}_-`, 10, 30).map((v) => [`gsk_${v}`, `gsk_${v}`]),
    run(`${alnum}_-`, 20, 30).map((v) => [`AIza${v}`, `AIza${v}`]),
    run(`${alnum}_-`, 10, 30).map((v) => [`pplx-${v}`, `pplx-${v}`]),
    run(alnum, 10, 30).map((v) => [`npm_${v}`, `npm_${v}`]),
    fc
      .tuple(
        fc.string({ unit: fc.constantFrom(..."0123456789".split("")), minLength: 6, maxLength: 12 }),
        run(`${alnum}_-`, 20, 40),
      )
      .map(([id, v]) => [`${id}:${v}`, `${id}:${v}`]),
    fc
      .tuple(
        fc.string({ unit: fc.constantFrom(..."0123456789".split("")), minLength: 6, maxLength: 12 }),
        run(`${alnum}_-`, 20, 40),
      )
      .map(([id, v]) => [`https://api.telegram.org/bot${id}:${v}/getMe`, `${id}:${v}`]),
    run(`${alnum}._-+=/~`, 18, 40).map((v) => [`Bearer ${v}`, v]),
    run(`${alnum}._-`, 3, 40).map((v) => [`Authorization: Bearer ${v}`, v]),
    fc
      .tuple(
        fc.constantFrom("OPENAI_API_KEY", "DB_PASSWORD", "x-api-key", "clientSecret", "Password"),
        fc.constantFrom("=", ": ", " = "),
        run(alnum, 3, 40),
      )
      .map(([n, op, v]) => [`${n}${op}${v}`, v]),
    fc
      .tuple(
        fc.constantFrom("apiKey", "token", "password", "refresh_token"),
        run(`${alnum} `, 3, 40).filter((v) => v.trim() === v),
      )
      .map(([n, v]) => [`{"${n}": "${v}"}`, v]),
    fc
      .tuple(
        fc.constantFrom("--api-key", "--token", "--password", "--hook-token"),
        fc.constantFrom(" ", "="),
        run(alnum, 3, 30),
      )
      .map(([f, sep, v]) => [`run ${f}${sep}${v}`, v]),
    run(`${alnum}\n`, 10, 200)
      .filter((v) => v.trim().length >= 10)
      .map((v) => [`-----BEGIN RSA PRIVATE KEY-----\n${v}\n-----END RSA PRIVATE KEY-----`, v]),
  );
  const prose = fc.string({ maxLength: 60 });

  it("the secret value never survives, a second pass changes nothing, and the text does not grow", () => {
    fc.assert(
      fc.property(prose, secret, prose, (before, [carrier, value], after) => {
        const text = `${before} ${carrier} ${after}`;
        fc.pre(!before.includes(value) && !after.includes(value));
        const once = redactSecrets(text);
        expect(once.redacted).toBe(true);
        expect(once.text).not.toContain(value);
        expect(once.text.length).toBeLessThanOrEqual(text.length);
        expect(redactSecrets(once.text).text).toBe(once.text);
      }),
      { numRuns: RUNS },
    );
  });

  it("only a value under three characters or a PEM body under ten grows when masked (`***`, `…redacted…`)", () => {
    // Documented masking: anything under 18 characters becomes `***`; a PEM body becomes `…redacted…`.
    expect(redactSecrets("GITHUB_TOKEN=ab").text).toBe("GITHUB_TOKEN=***");
    const pem = (body: string) => `-----BEGIN RSA PRIVATE KEY-----\n${body}\n-----END RSA PRIVATE KEY-----`;
    expect(redactSecrets(pem("abcdefgh")).text).toBe(pem("…redacted…"));
  });
});
