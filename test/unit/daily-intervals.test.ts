/**
 * Daily boundaries are found once per interval and then looked up (src/session/freshness.ts):
 * a looked-up answer must be the one a fresh search gives, for every instant, also across
 * daylight-saving changes, a reset hour inside a skipped hour, and a skipped calendar day.
 */
import { describe, expect, it } from "vitest";
import { forgetDailyIntervals, mostRecentDailyBoundary, nextDailyBoundary } from "../../src/session/freshness.js";
import { hostTimeZone } from "../../src/session/reset-policy.js";

const HOUR = 3_600_000;

/** Instants every `stepMs` from `fromIso` for `hours`, plus each one's neighbours at ±1 ms. */
function instants(fromIso: string, hours: number, stepMs: number): number[] {
  const start = Date.parse(fromIso);
  const out: number[] = [];
  for (let t = start; t < start + hours * HOUR; t += stepMs) out.push(t - 1, t, t + 1);
  return out;
}

function searched(t: number, hour: number, tz: string): [number, number] {
  forgetDailyIntervals();
  return [mostRecentDailyBoundary(t, hour, tz), nextDailyBoundary(t, hour, tz)];
}

describe("daily boundaries looked up", () => {
  it.each<[string, string, number]>([
    ["Europe/Berlin", "2026-03-27T00:00:00Z", 2], // spring forward: 02:00 does not exist on the 29th
    ["Europe/Berlin", "2026-10-23T00:00:00Z", 2], // fall back: 02:00 happens twice on the 25th
    ["America/New_York", "2026-03-06T00:00:00Z", 4],
    ["Australia/Lord_Howe", "2026-04-02T00:00:00Z", 1], // a 30-minute change
    ["Pacific/Apia", "2011-12-28T00:00:00Z", 4], // 30 December 2011 never happened there
    ["UTC", "2026-11-20T00:00:00Z", 0],
  ])("%s from %s at %i:00: the same as a fresh search, in any order", (tz, from, hour) => {
    const ts = instants(from, 6 * 24, 17 * 60_000 + 3);
    const expected = ts.map((t) => searched(t, hour, tz));
    forgetDailyIntervals();
    // Forwards, then backwards and interleaved: lookups of intervals found in another order.
    const order = [...ts.keys(), ...[...ts.keys()].reverse(), ...[...ts.keys()].filter((i) => i % 7 === 3)];
    for (const i of order) {
      const t = ts[i]!;
      const got = [mostRecentDailyBoundary(t, hour, tz), nextDailyBoundary(t, hour, tz)];
      expect(got, `${tz} ${new Date(t).toISOString()}`).toEqual(expected[i]);
      expect(got[0]! <= t && t < got[1]!).toBe(true);
    }
  });

  it("the host zone follows TZ when it changes", () => {
    const before = process.env.TZ;
    try {
      process.env.TZ = "Asia/Tokyo";
      expect(hostTimeZone()).toBe("Asia/Tokyo");
      process.env.TZ = "America/Chicago";
      expect(hostTimeZone()).toBe("America/Chicago");
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });
});
