/**
 * Freshness of a stored entry after a rotation without a message (sweep, `sessions.reset`):
 * the reset counts as activity (OpenClaw's touch-activity reset), so a reset session goes stale
 * one policy period after its reset; an untouched one holding nothing a rollover clears stays
 * fresh and out of the stale index (the sweep does not roll it over again and again).
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { entryStaleAt, freshnessOf } from "../../src/session/entry-freshness.js";
import type { SessionEntry } from "../../src/session/session-entry.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const D = Date.UTC(2031, 5, 10); // midnight UTC
const idle = parseConfig({ session: { reset: { mode: "idle", idleMinutes: 120 } } });
const daily = parseConfig({ session: { reset: { mode: "daily", atHour: 4, timezone: "UTC" } } });

function entry(fields: Partial<SessionEntry>): SessionEntry {
  return {
    key: "agent:main:discord:group:g1",
    sessionId: "s2",
    agentId: "main",
    kind: "group",
    updatedAt: D,
    createdAt: D,
    rev: 3,
    ...fields,
  };
}

describe("a session reset and untouched since", () => {
  it("with overrides: idle-stale one idle window after the reset, not after its last message", () => {
    // Last message at D, a sweep's rollover at D+1h (updatedAt preserved), label and model kept.
    const e = entry({ updatedAt: D, resetAt: D + HOUR, label: "L", modelOverride: "openai/gpt-5" });
    expect(freshnessOf(idle, e, D + 2 * HOUR + 1).fresh).toBe(true); // past 120 min since the message
    expect(freshnessOf(idle, e, D + 3 * HOUR).fresh).toBe(true); // exactly 120 min after the reset
    expect(freshnessOf(idle, e, D + 3 * HOUR + 1)).toMatchObject({ fresh: false, staleReason: "idle" });
    expect(freshnessOf(idle, e, D + DAY)).toMatchObject({ fresh: false, staleReason: "idle" });
    // The index agrees: stale from the first instant freshness says so.
    expect(entryStaleAt(idle, e)).toBe(D + HOUR + 120 * MIN + 1);
  });

  it("with overrides: daily-stale at the first boundary after the reset, never for the one it was reset at", () => {
    // Last message the day before, reset at 05:00 (after that day's 04:00 boundary).
    const e = entry({ updatedAt: D - 10 * HOUR, resetAt: D + 5 * HOUR, thinkingLevel: "high" });
    expect(freshnessOf(daily, e, D + 6 * HOUR).fresh).toBe(true);
    expect(freshnessOf(daily, e, D + DAY + 4 * HOUR - 1).fresh).toBe(true);
    expect(freshnessOf(daily, e, D + DAY + 4 * HOUR)).toMatchObject({ fresh: false, staleReason: "daily" });
    expect(entryStaleAt(daily, e)).toBe(D + DAY + 4 * HOUR);
  });

  it("a sweep's rollover (nothing left to clear) is not rolled over again, and leaves the stale index", () => {
    const e = entry({ updatedAt: D, resetAt: D + 3 * HOUR, resetReason: "idle", previousSessionId: "s1" });
    for (const now of [D + 6 * HOUR, D + 3 * DAY, D + 300 * DAY]) {
      expect(freshnessOf(idle, e, now).fresh).toBe(true);
      expect(freshnessOf(daily, e, now).fresh).toBe(true);
    }
    expect(entryStaleAt(idle, e)).toBeNull();
    expect(entryStaleAt(daily, e)).toBeNull();
    // A mute survives the sweep's rollover anyway: it is nothing to reset.
    expect(entryStaleAt(idle, entry({ ...e, sendPolicy: "deny" }))).toBeNull();
    // Empty counters are nothing to reset either.
    expect(entryStaleAt(idle, entry({ ...e, abortedLastRun: false, totalTokens: 0 }))).toBeNull();
  });

  it("an override set after a sweep's rollover expires one window after that rollover", () => {
    const e = entry({ updatedAt: D, resetAt: D + 3 * HOUR, resetReason: "idle", sendPolicy: "allow" });
    expect(freshnessOf(idle, e, D + 5 * HOUR).fresh).toBe(true);
    expect(freshnessOf(idle, e, D + 5 * HOUR + 1)).toMatchObject({ fresh: false, staleReason: "idle" });
    expect(entryStaleAt(idle, e)).toBe(D + 5 * HOUR + 1);
  });

  it("a message since the reset: the clock runs from the message, as for any session", () => {
    const e = entry({ updatedAt: D + 2 * HOUR, resetAt: D + HOUR, label: "L" });
    expect(freshnessOf(idle, e, D + 4 * HOUR).fresh).toBe(true);
    expect(freshnessOf(idle, e, D + 4 * HOUR + 1).fresh).toBe(false);
    expect(entryStaleAt(idle, e)).toBe(D + 4 * HOUR + 1);
    // And a session never reset is judged by updatedAt alone (no override needed to go stale).
    const plain = entry({ updatedAt: D });
    expect(freshnessOf(idle, plain, D + 2 * HOUR + 1)).toMatchObject({ fresh: false, staleReason: "idle" });
    expect(entryStaleAt(idle, plain)).toBe(D + 2 * HOUR + 1);
  });
});
