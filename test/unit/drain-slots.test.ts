/**
 * The ready-list consumer's drain slots, and which sessions a push may put on the ready list.
 */
import { describe, expect, it } from "vitest";
import { Slots } from "../../src/workers/slots.js";
import { readyWake } from "../../src/runs/enqueue.js";
import { parseConfig } from "../../src/config/index.js";

describe("Slots", () => {
  it("hands out at most `size` slots and gives a released one to the first waiter", async () => {
    const slots = new Slots(2);
    await slots.acquire();
    await slots.acquire();
    expect(slots.free).toBe(0);
    const order: string[] = [];
    const a = slots.acquire().then(() => order.push("a"));
    const b = slots.acquire().then(() => order.push("b"));
    await Promise.resolve();
    expect(order).toEqual([]);
    slots.release();
    await a;
    expect(order).toEqual(["a"]);
    expect(slots.free).toBe(0);
    slots.release();
    await b;
    expect(order).toEqual(["a", "b"]);
    slots.release();
    slots.release();
    expect(slots.free).toBe(2);
  });
});

describe("Slots.tryAcquire", () => {
  it("takes a free slot at once, and none while all are taken or someone waits", async () => {
    const slots = new Slots(2);
    expect(slots.tryAcquire()).toBe(true);
    expect(slots.tryAcquire()).toBe(true);
    expect(slots.tryAcquire()).toBe(false);
    const waiter = slots.acquire();
    slots.release(); // handed to the waiter, not freed
    await waiter;
    expect(slots.tryAcquire()).toBe(false);
    slots.release();
    expect(slots.tryAcquire()).toBe(true);
  });
});

describe("readyWake", () => {
  it("readies plain sessions by default, never sub-agent sessions, and nothing with wake: drain-job", () => {
    const ready = parseConfig({});
    const jobs = parseConfig({ workers: { wake: "drain-job" } });
    expect(ready.workers.wake).toBe("ready-list");
    expect(readyWake(ready, "agent:main:telegram:dm:42")).toBe(true);
    expect(readyWake(ready, "agent:main:subagent:abc")).toBe(false);
    expect(readyWake(jobs, "agent:main:telegram:dm:42")).toBe(false);
  });

  it("refuses an unknown wake mode with a config error", () => {
    expect(() => parseConfig({ workers: { wake: "poll" } } as never)).toThrow(/wake/);
  });
});
