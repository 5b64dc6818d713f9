/**
 * Which messages share a delivery lane (src/delivery/lane-id.ts), and how long a message behind
 * another stays away before it looks again (src/delivery/delivery-lane.ts). Pure, no Redis.
 */
import { describe, expect, it } from "vitest";
import { deliveryLaneId, laneIdOf } from "../../src/delivery/lane-id.js";
import { laneRecheckMs } from "../../src/delivery/delivery-lane.js";

const hook = { kind: "webhook" as const, url: "http://127.0.0.1:1/", timeoutMs: 1000 };

describe("delivery lanes", () => {
  it("one lane per channel, account, recipient and thread", () => {
    const base = { channel: "tg", accountId: "bot1", to: "u1", threadId: "7" };
    expect(laneIdOf({ ...base })).toBe(laneIdOf(base));
    for (const other of [
      { ...base, channel: "wa" },
      { ...base, accountId: "bot2" },
      { ...base, to: "u2" },
      { ...base, threadId: "8" },
      { channel: "tg", accountId: "bot1", to: "u1" },
    ])
      expect(laneIdOf(other), JSON.stringify(other)).not.toBe(laneIdOf(base));
    // Parts are kept apart: moving text from one part to the next is another chat.
    expect(laneIdOf({ channel: "tg", to: "ab", threadId: "c" })).not.toBe(
      laneIdOf({ channel: "tg", to: "a", threadId: "bc" }),
    );
  });

  it("is readable by channel and bounded, whatever the recipient holds", () => {
    const id = laneIdOf({ channel: "tg", to: "x".repeat(10_000) });
    expect(id).toMatch(/^tg:[0-9a-f]{32}$/);
  });

  it("a webhook channel has lanes; a log channel and a missing adapter have none", () => {
    const route = { channel: "tg", to: "u1" };
    expect(deliveryLaneId(hook, route)).toBe(laneIdOf(route));
    expect(deliveryLaneId({ kind: "log" }, route)).toBeUndefined();
    expect(deliveryLaneId(undefined, route)).toBeUndefined();
  });

  it("a waiting message looks again after 0.5 s, doubling to at most 5 s", () => {
    expect([0, 1, 2, 3, 4, 5, 50].map(laneRecheckMs)).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000]);
    expect(laneRecheckMs(-3)).toBe(500);
  });
});
