import { describe, expect, it } from "vitest";
import { LogThrottle } from "../../src/transcript/log-throttle.js";

describe("LogThrottle", () => {
  it("logs a key's first line, then at most one per interval with the count left out", () => {
    const t = new LogThrottle(60_000);
    expect(t.take("a", 0)).toEqual({ log: true, suppressed: 0 });
    for (let s = 1; s < 60; s++) expect(t.take("a", s * 1000).log).toBe(false);
    // Another key is its own.
    expect(t.take("b", 30_000)).toEqual({ log: true, suppressed: 0 });
    expect(t.take("a", 60_000)).toEqual({ log: true, suppressed: 59 });
    expect(t.take("a", 61_000)).toEqual({ log: false, suppressed: 1 });
  });

  it("remembers a bounded number of keys, forgetting the oldest", () => {
    const t = new LogThrottle(60_000, 2);
    t.take("a", 0);
    t.take("b", 0);
    t.take("c", 0); // "a" forgotten
    expect(t.take("a", 1).log).toBe(true);
    expect(t.take("c", 1).log).toBe(false);
  });
});
