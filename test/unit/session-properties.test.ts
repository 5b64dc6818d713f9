/**
 * Property tests (fast-check) for the pure session logic: what must hold for every input, not
 * only for the table cases. Key building and parsing round trips, the daily boundary around any
 * instant in any zone, and credential redaction.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { canonicalSessionKey } from "../../src/session/key-canonical.js";
import { resolveInboundSession, threadSessionKey } from "../../src/session/key-build.js";
import { agentIdFromSessionKey, parseAgentSessionKey, parseThreadSuffix } from "../../src/session/key-parse.js";
import { evaluateFreshness, mostRecentDailyBoundary, nextDailyBoundary } from "../../src/session/freshness.js";
import { redactSecrets } from "../../src/history/redact.js";
import { sanitizeForHandoff } from "../../src/history/handoff.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 300);
const idChars = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789_-".split(""));
const agentId = fc.tuple(fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789".split("")), fc.string({ unit: idChars, maxLength: 20 })).map(([a, b]) => a + b);
/** Peer and group ids as channels send them: mixed case, digits, punctuation, no separators. */
const peerId = fc.string({ unit: fc.constantFrom(..."abcXYZ0189+@._-".split("")), minLength: 1, maxLength: 24 }).filter((s) => s.trim() === s && s.length > 0);
const channel = fc.constantFrom("telegram", "whatsapp", "discord", "slack", "web", "signal");
const dmScope = fc.constantFrom("main", "per-peer", "per-channel-peer", "per-account-channel-peer");

describe("session keys", () => {
  it("an inbound message's key is canonical, belongs to its agent, and canonicalising it again changes nothing", () => {
    fc.assert(
      fc.property(agentId, channel, peerId, fc.option(peerId, { nil: undefined }), fc.constantFrom("dm", "group", "channel") as fc.Arbitrary<"dm" | "group" | "channel">, dmScope, (agent, ch, from, groupId, chatType, scope) => {
        const config = parseConfig({ session: { dmScope: scope }, agents: { list: [{ id: agent, default: true }] } });
        const msg = { channel: ch, chatType, from, agentId: agent, ...(chatType !== "dm" ? { groupId: groupId ?? from } : {}) };
        const { sessionKey, agentId: resolved } = resolveInboundSession(config, msg);
        expect(resolved).toBe(agent);
        expect(sessionKey).toBe(sessionKey.toLowerCase());
        expect(canonicalSessionKey(config, sessionKey)).toBe(sessionKey);
        expect(parseAgentSessionKey(sessionKey)?.agentId).toBe(agent);
        expect(agentIdFromSessionKey(sessionKey, "fallback")).toBe(agent);
      }),
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
  const zone = fc.constantFrom("UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham");
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
      fc.property(instant, fc.integer({ min: 0, max: 3 * 86_400_000 }), fc.integer({ min: 0, max: 23 }), zone, (now, age, atHour, tz) => {
        const updatedAt = now - age;
        const f = evaluateFreshness({ updatedAt, now, policy: { mode: "daily", atHour, timezone: tz } });
        expect(f.fresh).toBe(updatedAt >= mostRecentDailyBoundary(now, atHour, tz));
      }),
      { numRuns: RUNS },
    );
  });
});

describe("credential redaction", () => {
  const token = fc.oneof(
    fc.string({ unit: fc.constantFrom(..."abcdefghijkLMNOP0123456789_-".split("")), minLength: 20, maxLength: 60 }).map((s) => `sk-${s}`),
    fc.string({ unit: fc.constantFrom(..."abcdefXYZ0123456789".split("")), minLength: 36, maxLength: 40 }).map((s) => `ghp_${s}`),
    fc.string({ unit: fc.constantFrom(..."abcdefXYZ0123456789".split("")), minLength: 20, maxLength: 40 }).map((s) => `OPENAI_API_KEY=${s}`),
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
        expect(once.text).not.toMatch(/\bsk-[A-Za-z0-9_-]{8,}\b|\bghp_[A-Za-z0-9]{20,}\b|OPENAI_API_KEY=[A-Za-z0-9]{8,}/);
      }),
      { numRuns: RUNS },
    );
  });
});

describe("text handed to another agent or a channel", () => {
  const piece = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom("<think>plan</think>", "<thinking>x</thinking>", "NO_REPLY", "```code```", "<tool_call>{}</tool_call>", "\n", " "),
  );
  it("sanitising is idempotent and never makes text longer", () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }).map((a) => a.join("")), (text) => {
        const once = sanitizeForHandoff(text);
        expect(once.length).toBeLessThanOrEqual(text.length);
        expect(sanitizeForHandoff(once)).toBe(once);
      }),
      { numRuns: RUNS },
    );
  });
});
