import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import {
  evaluateFreshness,
  mostRecentDailyBoundary,
  nextDailyBoundary,
  staleAt,
  zonedDateHourToInstant,
  type Freshness,
} from "../../src/session/freshness.js";
import { hostTimeZone, resolveResetPolicy, type ResetPolicy } from "../../src/session/reset-policy.js";

const t = (iso: string): number => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad ISO in test: ${iso}`);
  return ms;
};
const MIN = 60_000;
const HOUR = 60 * MIN;

describe("zonedDateHourToInstant", () => {
  it.each<[string, [number, number, number, number], string]>([
    ["UTC", [2026, 3, 3, 4], "2026-03-03T04:00:00.000Z"],
    ["Europe/Berlin", [2026, 1, 15, 4], "2026-01-15T03:00:00.000Z"],
    ["Europe/Berlin", [2026, 7, 1, 4], "2026-07-01T02:00:00.000Z"],
    // spring forward: 02:00-02:59 does not exist ⇒ first instant after the gap (03:00 CEST)
    ["Europe/Berlin", [2026, 3, 29, 2], "2026-03-29T01:00:00.000Z"],
    ["Europe/Berlin", [2026, 3, 29, 3], "2026-03-29T01:00:00.000Z"],
    ["Europe/Berlin", [2026, 3, 29, 1], "2026-03-29T00:00:00.000Z"],
    // fall back: 02:00-02:59 happens twice ⇒ first occurrence (CEST)
    ["Europe/Berlin", [2026, 10, 25, 2], "2026-10-25T00:00:00.000Z"],
    ["Europe/Berlin", [2026, 10, 25, 3], "2026-10-25T02:00:00.000Z"],
    ["America/New_York", [2026, 3, 8, 2], "2026-03-08T07:00:00.000Z"],
    ["America/New_York", [2026, 3, 8, 4], "2026-03-08T08:00:00.000Z"],
    ["America/New_York", [2026, 11, 1, 1], "2026-11-01T05:00:00.000Z"],
    ["America/New_York", [2026, 11, 1, 2], "2026-11-01T07:00:00.000Z"],
    ["Asia/Kathmandu", [2026, 3, 3, 4], "2026-03-02T22:15:00.000Z"],
    ["Asia/Kolkata", [2026, 3, 3, 0], "2026-03-02T18:30:00.000Z"],
    // half-hour DST shift
    ["Australia/Lord_Howe", [2026, 10, 4, 2], "2026-10-03T15:30:00.000Z"],
    // midnight skipped (Chile spring forward at 24:00)
    ["America/Santiago", [2026, 9, 6, 0], "2026-09-06T04:00:00.000Z"],
    ["Pacific/Kiritimati", [2026, 1, 1, 0], "2025-12-31T10:00:00.000Z"],
  ])("%s %j", (tz, [y, m, d, h], expected) => {
    expect(new Date(zonedDateHourToInstant(y, m, d, h, tz)).toISOString()).toBe(expected);
  });
});

describe("mostRecentDailyBoundary", () => {
  it.each<[string, number, string, string]>([
    ["2026-03-03T04:00:00.000Z", 4, "UTC", "2026-03-03T04:00:00.000Z"],
    ["2026-03-03T03:59:59.999Z", 4, "UTC", "2026-03-02T04:00:00.000Z"],
    ["2026-01-01T00:30:00.000Z", 4, "UTC", "2025-12-31T04:00:00.000Z"],
    ["2026-03-01T00:00:00.000Z", 23, "UTC", "2026-02-28T23:00:00.000Z"],
    ["2026-01-15T03:00:00.000Z", 4, "Europe/Berlin", "2026-01-15T03:00:00.000Z"],
    ["2026-01-15T02:59:59.999Z", 4, "Europe/Berlin", "2026-01-14T03:00:00.000Z"],
    ["2026-07-01T02:00:00.000Z", 4, "Europe/Berlin", "2026-07-01T02:00:00.000Z"],
    // Europe/Berlin spring forward 2026-03-29
    ["2026-03-29T02:00:00.000Z", 4, "Europe/Berlin", "2026-03-29T02:00:00.000Z"],
    ["2026-03-29T01:59:59.999Z", 4, "Europe/Berlin", "2026-03-28T03:00:00.000Z"],
    ["2026-03-29T01:00:00.000Z", 2, "Europe/Berlin", "2026-03-29T01:00:00.000Z"],
    ["2026-03-29T00:59:59.999Z", 2, "Europe/Berlin", "2026-03-28T01:00:00.000Z"],
    ["2026-03-30T01:59:59.999Z", 4, "Europe/Berlin", "2026-03-29T02:00:00.000Z"],
    // Europe/Berlin fall back 2026-10-25
    ["2026-10-25T00:00:00.000Z", 2, "Europe/Berlin", "2026-10-25T00:00:00.000Z"],
    ["2026-10-25T01:30:00.000Z", 2, "Europe/Berlin", "2026-10-25T00:00:00.000Z"],
    ["2026-10-24T23:59:59.999Z", 2, "Europe/Berlin", "2026-10-24T00:00:00.000Z"],
    ["2026-10-25T03:00:00.000Z", 4, "Europe/Berlin", "2026-10-25T03:00:00.000Z"],
    ["2026-10-25T02:59:59.999Z", 4, "Europe/Berlin", "2026-10-24T02:00:00.000Z"],
    // America/New_York
    ["2026-03-03T14:00:00.000Z", 4, "America/New_York", "2026-03-03T09:00:00.000Z"],
    ["2026-03-03T08:59:59.999Z", 4, "America/New_York", "2026-03-02T09:00:00.000Z"],
    ["2026-03-08T12:00:00.000Z", 2, "America/New_York", "2026-03-08T07:00:00.000Z"],
    ["2026-11-01T06:30:00.000Z", 1, "America/New_York", "2026-11-01T05:00:00.000Z"],
    // non-hour offsets
    ["2026-03-02T22:15:00.000Z", 4, "Asia/Kathmandu", "2026-03-02T22:15:00.000Z"],
    ["2026-03-02T22:14:59.999Z", 4, "Asia/Kathmandu", "2026-03-01T22:15:00.000Z"],
    ["2026-03-02T18:30:00.000Z", 0, "Asia/Kolkata", "2026-03-02T18:30:00.000Z"],
    ["2026-03-02T18:29:59.999Z", 0, "Asia/Kolkata", "2026-03-01T18:30:00.000Z"],
  ])("now %s at %i:00 %s ⇒ %s", (now, hour, tz, expected) => {
    expect(new Date(mostRecentDailyBoundary(t(now), hour, tz)).toISOString()).toBe(expected);
  });

  it("defaults to the host time zone", () => {
    const now = t("2026-06-15T12:34:56.789Z");
    expect(mostRecentDailyBoundary(now, 4)).toBe(mostRecentDailyBoundary(now, 4, hostTimeZone()));
  });
});

describe("nextDailyBoundary", () => {
  it.each<[string, number, string, string]>([
    ["2026-03-03T04:00:00.000Z", 4, "UTC", "2026-03-04T04:00:00.000Z"],
    ["2026-03-03T03:59:59.999Z", 4, "UTC", "2026-03-03T04:00:00.000Z"],
    ["2026-12-31T05:00:00.000Z", 4, "UTC", "2027-01-01T04:00:00.000Z"],
    ["2026-03-28T12:00:00.000Z", 2, "Europe/Berlin", "2026-03-29T01:00:00.000Z"],
    ["2026-03-28T12:00:00.000Z", 4, "Europe/Berlin", "2026-03-29T02:00:00.000Z"],
    ["2026-10-24T12:00:00.000Z", 2, "Europe/Berlin", "2026-10-25T00:00:00.000Z"],
    ["2026-10-25T00:00:00.000Z", 2, "Europe/Berlin", "2026-10-26T01:00:00.000Z"],
    ["2026-11-01T05:00:00.000Z", 1, "America/New_York", "2026-11-02T06:00:00.000Z"],
    ["2026-03-02T22:15:00.000Z", 4, "Asia/Kathmandu", "2026-03-03T22:15:00.000Z"],
  ])("after %s at %i:00 %s ⇒ %s", (now, hour, tz, expected) => {
    expect(new Date(nextDailyBoundary(t(now), hour, tz)).toISOString()).toBe(expected);
  });

  it.each([
    ["Europe/Berlin", "2026-03-27T00:00:00Z"],
    ["Europe/Berlin", "2026-10-23T00:00:00Z"],
    ["America/New_York", "2026-03-06T00:00:00Z"],
    ["America/New_York", "2026-10-30T00:00:00Z"],
    ["Asia/Kathmandu", "2026-03-01T00:00:00Z"],
    ["Australia/Lord_Howe", "2026-10-02T00:00:00Z"],
    ["America/Santiago", "2026-04-03T00:00:00Z"],
  ])("%s: previous ≤ now < next, every 37 minutes for 5 days", (tz, startIso) => {
    const start = t(startIso);
    for (const hour of [0, 2, 4]) {
      for (let now = start; now < start + 5 * 24 * HOUR; now += 37 * MIN) {
        const prev = mostRecentDailyBoundary(now, hour, tz);
        const next = nextDailyBoundary(now, hour, tz);
        expect(prev).toBeLessThanOrEqual(now);
        expect(next).toBeGreaterThan(now);
        expect(next - prev).toBeGreaterThanOrEqual(22 * HOUR);
        expect(next - prev).toBeLessThanOrEqual(26 * HOUR);
        // no boundary strictly between them
        expect(nextDailyBoundary(prev, hour, tz)).toBe(next);
        expect(mostRecentDailyBoundary(next - 1, hour, tz)).toBe(prev);
      }
    }
  });
});

const daily = (atHour: number, timezone: string, idleMinutes?: number): ResetPolicy =>
  idleMinutes === undefined ? { mode: "daily", atHour, timezone } : { mode: "daily", atHour, timezone, idleMinutes };
const idle = (idleMinutes: number): ResetPolicy => ({ mode: "idle", idleMinutes });

describe("evaluateFreshness", () => {
  it.each<[string, ResetPolicy, string, string, Freshness]>([
    ["off is always fresh", { mode: "off" }, "2020-01-01T00:00:00.000Z", "2026-03-03T12:00:00.000Z", { fresh: true }],
    [
      "off ignores a stray idleMinutes",
      { mode: "off", idleMinutes: 1 },
      "2026-03-03T00:00:00.000Z",
      "2026-03-03T12:00:00.000Z",
      { fresh: true },
    ],
    // daily boundary (UTC)
    [
      "updated 1 ms before the boundary, now at the boundary ⇒ stale daily",
      daily(4, "UTC"),
      "2026-03-03T03:59:59.999Z",
      "2026-03-03T04:00:00.000Z",
      { fresh: false, dailyResetAt: t("2026-03-03T04:00:00.000Z"), staleReason: "daily" },
    ],
    [
      "updated 1 ms before the boundary, now 1 ms before ⇒ fresh",
      daily(4, "UTC"),
      "2026-03-03T03:59:59.998Z",
      "2026-03-03T03:59:59.999Z",
      { fresh: true, dailyResetAt: t("2026-03-02T04:00:00.000Z") },
    ],
    [
      "updated exactly at the boundary ⇒ fresh (strict <)",
      daily(4, "UTC"),
      "2026-03-03T04:00:00.000Z",
      "2026-03-03T04:00:00.001Z",
      { fresh: true, dailyResetAt: t("2026-03-03T04:00:00.000Z") },
    ],
    [
      "several days old ⇒ stale daily",
      daily(4, "UTC"),
      "2026-02-20T10:00:00.000Z",
      "2026-03-03T10:00:00.000Z",
      { fresh: false, dailyResetAt: t("2026-03-03T04:00:00.000Z"), staleReason: "daily" },
    ],
    // idle (strict >)
    [
      "idle: exactly idleMinutes later ⇒ fresh",
      idle(60),
      "2026-03-03T10:00:00.000Z",
      "2026-03-03T11:00:00.000Z",
      { fresh: true, idleExpiresAt: t("2026-03-03T11:00:00.000Z") },
    ],
    [
      "idle: 1 ms past ⇒ stale idle",
      idle(60),
      "2026-03-03T10:00:00.000Z",
      "2026-03-03T11:00:00.001Z",
      { fresh: false, idleExpiresAt: t("2026-03-03T11:00:00.000Z"), staleReason: "idle" },
    ],
    ["idle 0 never expires", idle(0), "2020-01-01T00:00:00.000Z", "2026-03-03T11:00:00.000Z", { fresh: true }],
    [
      "idle without minutes never expires",
      { mode: "idle" },
      "2020-01-01T00:00:00.000Z",
      "2026-03-03T11:00:00.000Z",
      { fresh: true },
    ],
    [
      "idle mode has no daily reset",
      idle(600),
      "2026-03-03T03:00:00.000Z",
      "2026-03-03T05:00:00.000Z",
      { fresh: true, idleExpiresAt: t("2026-03-03T13:00:00.000Z") },
    ],
    // daily + idle
    [
      "daily + idle: idle expired first",
      daily(4, "UTC", 30),
      "2026-03-03T10:00:00.000Z",
      "2026-03-03T10:30:00.001Z",
      {
        fresh: false,
        dailyResetAt: t("2026-03-03T04:00:00.000Z"),
        idleExpiresAt: t("2026-03-03T10:30:00.000Z"),
        staleReason: "idle",
      },
    ],
    [
      "daily + idle: only daily stale",
      daily(4, "UTC", 120),
      "2026-03-03T03:30:00.000Z",
      "2026-03-03T04:10:00.000Z",
      {
        fresh: false,
        dailyResetAt: t("2026-03-03T04:00:00.000Z"),
        idleExpiresAt: t("2026-03-03T05:30:00.000Z"),
        staleReason: "daily",
      },
    ],
    [
      "daily + idle: both stale ⇒ reason idle",
      daily(4, "UTC", 10),
      "2026-03-03T03:00:00.000Z",
      "2026-03-03T05:00:00.000Z",
      {
        fresh: false,
        dailyResetAt: t("2026-03-03T04:00:00.000Z"),
        idleExpiresAt: t("2026-03-03T03:10:00.000Z"),
        staleReason: "idle",
      },
    ],
    [
      "daily + idle 0 ⇒ daily only",
      daily(4, "UTC", 0),
      "2026-03-03T04:00:00.000Z",
      "2026-03-04T03:59:59.999Z",
      { fresh: true, dailyResetAt: t("2026-03-03T04:00:00.000Z") },
    ],
    // time zones and DST
    [
      "Berlin spring forward, atHour 2: stale from 03:00 CEST",
      daily(2, "Europe/Berlin"),
      "2026-03-29T00:59:59.999Z",
      "2026-03-29T01:00:00.000Z",
      { fresh: false, dailyResetAt: t("2026-03-29T01:00:00.000Z"), staleReason: "daily" },
    ],
    [
      "Berlin spring forward, atHour 2: fresh 1 ms before",
      daily(2, "Europe/Berlin"),
      "2026-03-28T01:00:00.000Z",
      "2026-03-29T00:59:59.999Z",
      { fresh: true, dailyResetAt: t("2026-03-28T01:00:00.000Z") },
    ],
    [
      "Berlin fall back, atHour 2: the second 02:30 is not a new boundary",
      daily(2, "Europe/Berlin"),
      "2026-10-25T00:30:00.000Z",
      "2026-10-25T01:30:00.000Z",
      { fresh: true, dailyResetAt: t("2026-10-25T00:00:00.000Z") },
    ],
    [
      "Berlin fall back, atHour 4 (CET)",
      daily(4, "Europe/Berlin"),
      "2026-10-25T02:59:59.999Z",
      "2026-10-25T03:00:00.000Z",
      { fresh: false, dailyResetAt: t("2026-10-25T03:00:00.000Z"), staleReason: "daily" },
    ],
    [
      "New York 04:00 is 09:00 UTC in winter",
      daily(4, "America/New_York"),
      "2026-03-03T08:00:00.000Z",
      "2026-03-03T14:00:00.000Z",
      { fresh: false, dailyResetAt: t("2026-03-03T09:00:00.000Z"), staleReason: "daily" },
    ],
    [
      "New York: the UTC 04:00 is not a boundary there",
      daily(4, "America/New_York"),
      "2026-03-03T03:00:00.000Z",
      "2026-03-03T05:00:00.000Z",
      { fresh: true, dailyResetAt: t("2026-03-02T09:00:00.000Z") },
    ],
    [
      "Kathmandu 04:00 is 22:15 UTC the day before",
      daily(4, "Asia/Kathmandu"),
      "2026-03-02T22:14:59.999Z",
      "2026-03-02T22:15:00.000Z",
      { fresh: false, dailyResetAt: t("2026-03-02T22:15:00.000Z"), staleReason: "daily" },
    ],
    [
      "Kolkata midnight",
      daily(0, "Asia/Kolkata"),
      "2026-03-02T18:30:00.000Z",
      "2026-03-03T18:29:59.999Z",
      { fresh: true, dailyResetAt: t("2026-03-02T18:30:00.000Z") },
    ],
  ])("%s", (_name, policy, updatedAt, now, expected) => {
    expect(evaluateFreshness({ updatedAt: t(updatedAt), now: t(now), policy })).toStrictEqual(expected);
  });

  it("matches the upstream shape for idle mode with idleMinutes 0", () => {
    expect(evaluateFreshness({ updatedAt: 0, now: 10 * 365 * 24 * HOUR, policy: idle(0) })).toEqual({
      fresh: true,
      dailyResetAt: undefined,
      idleExpiresAt: undefined,
    });
  });

  it("daily without atHour/timezone uses 04:00 in the host zone", () => {
    const now = t("2026-06-15T12:00:00.000Z");
    const r = evaluateFreshness({ updatedAt: now - 1, now, policy: { mode: "daily" } });
    expect(r.dailyResetAt).toBe(mostRecentDailyBoundary(now, 4, hostTimeZone()));
  });

  it("works end to end with a resolved policy", () => {
    const config = parseConfig({ session: { reset: { atHour: 4, timezone: "Europe/Berlin", idleMinutes: 120 } } });
    const policy = resolveResetPolicy(config, { sessionKey: "agent:main:telegram:dm:1" });
    const updatedAt = t("2026-03-29T01:30:00.000Z"); // 03:30 CEST
    expect(evaluateFreshness({ updatedAt, now: t("2026-03-29T01:59:59.999Z"), policy }).fresh).toBe(true);
    expect(evaluateFreshness({ updatedAt, now: t("2026-03-29T02:00:00.000Z"), policy }).staleReason).toBe("daily");
  });
});

describe("staleAt", () => {
  it.each<[string, ResetPolicy, string, string | undefined]>([
    ["off never", { mode: "off" }, "2026-03-03T10:00:00.000Z", undefined],
    ["idle 0 never", idle(0), "2026-03-03T10:00:00.000Z", undefined],
    ["idle without minutes never", { mode: "idle" }, "2026-03-03T10:00:00.000Z", undefined],
    ["idle: +idle +1 ms", idle(60), "2026-03-03T10:00:00.000Z", "2026-03-03T11:00:00.001Z"],
    ["daily: next boundary", daily(4, "UTC"), "2026-03-03T03:59:59.999Z", "2026-03-03T04:00:00.000Z"],
    [
      "daily: updated at the boundary ⇒ next day",
      daily(4, "UTC"),
      "2026-03-03T04:00:00.000Z",
      "2026-03-04T04:00:00.000Z",
    ],
    ["daily + idle: idle first", daily(4, "UTC", 30), "2026-03-03T10:00:00.000Z", "2026-03-03T10:30:00.001Z"],
    ["daily + idle: daily first", daily(4, "UTC", 120), "2026-03-03T03:00:00.000Z", "2026-03-03T04:00:00.000Z"],
    ["daily + idle 0", daily(4, "UTC", 0), "2026-03-03T10:00:00.000Z", "2026-03-04T04:00:00.000Z"],
    [
      "Berlin spring forward atHour 2",
      daily(2, "Europe/Berlin"),
      "2026-03-28T12:00:00.000Z",
      "2026-03-29T01:00:00.000Z",
    ],
    ["Berlin fall back atHour 2", daily(2, "Europe/Berlin"), "2026-10-24T12:00:00.000Z", "2026-10-25T00:00:00.000Z"],
    ["New York", daily(4, "America/New_York"), "2026-03-03T14:00:00.000Z", "2026-03-04T09:00:00.000Z"],
    ["Kathmandu", daily(4, "Asia/Kathmandu"), "2026-03-02T12:00:00.000Z", "2026-03-02T22:15:00.000Z"],
  ])("%s", (_name, policy, updatedAt, expected) => {
    const at = staleAt({ updatedAt: t(updatedAt), policy });
    expect(at === undefined ? undefined : new Date(at).toISOString()).toBe(expected);
  });

  it.each<[string, ResetPolicy]>([
    ["daily UTC", daily(4, "UTC")],
    ["daily Berlin + idle", daily(2, "Europe/Berlin", 90)],
    ["daily New York", daily(1, "America/New_York")],
    ["daily Kathmandu + idle", daily(4, "Asia/Kathmandu", 600)],
    ["idle", idle(45)],
  ])("%s: fresh 1 ms before staleAt, stale at it", (_name, policy) => {
    for (const iso of [
      "2026-03-28T23:30:00.000Z",
      "2026-03-29T00:59:59.999Z",
      "2026-03-08T06:30:00.000Z",
      "2026-10-25T00:15:00.000Z",
      "2026-11-01T05:30:00.000Z",
      "2026-03-02T22:00:00.000Z",
    ]) {
      const updatedAt = t(iso);
      const at = staleAt({ updatedAt, policy });
      expect(at).toBeDefined();
      if (at === undefined) continue;
      expect(at).toBeGreaterThan(updatedAt);
      expect(evaluateFreshness({ updatedAt, now: at - 1, policy }).fresh).toBe(true);
      expect(evaluateFreshness({ updatedAt, now: at, policy }).fresh).toBe(false);
    }
  });
});
