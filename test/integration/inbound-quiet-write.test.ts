/**
 * A chat message that changes nothing about its session but its activity, within the activity
 * lag a turn may leave (a minute, or a tenth of the idle window), writes no session entry: the
 * DM's next message costs its push alone. Anything else it changes is written as before (another
 * route, a reset to clear, activity older than the lag). Real Redis, gateway + workers here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryOf, inbound, runOk, userTexts } from "../helpers/api.js";

const MIN = 60_000;
let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    gateway: { limits: { timestampAheadMs: 30 * MIN } },
    session: { dmScope: "per-channel-peer", reset: { mode: "idle", idleMinutes: 120 } },
    agents: { defaults: { runtime: { kind: "script", rules: [{ reply: "echo: {{text}}" }] } } },
  });
});

afterAll(async () => {
  await sys?.close();
});

describe("a DM's next message", () => {
  it("within the lag writes no entry, and its turn runs in the session", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "quiet-1" };
    const first = await inbound(sys, { ...dm, text: "one" });
    await runOk(sys, first.runId);
    const before = await entryOf(sys, first.sessionKey);
    const second = await inbound(sys, { ...dm, text: "two" });
    expect(second.sessionId).toBe(first.sessionId);
    await runOk(sys, second.runId);
    const after = await entryOf(sys, first.sessionKey);
    // rev counts every write of the entry: the message wrote none (the turns' finishes neither).
    expect(after.rev).toBe(before.rev);
    expect(after.updatedAt).toBe(before.updatedAt);
    expect(await userTexts(sys, first.sessionKey)).toEqual(["one", "two"]);
  });

  it("through another bot account writes the route", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "quiet-2" };
    const first = await inbound(sys, { ...dm, text: "one" });
    await runOk(sys, first.runId);
    const before = await entryOf(sys, first.sessionKey);
    const other = await inbound(sys, { ...dm, accountId: "bot2", text: "two" });
    expect(other.sessionKey).toBe(first.sessionKey);
    await runOk(sys, other.runId);
    const after = await entryOf(sys, first.sessionKey);
    expect(after.rev).toBeGreaterThan(before.rev);
    expect(after.deliveryContext).toMatchObject({ channel: "tg", to: "quiet-2", accountId: "bot2" });
    // And back without the account: written again, the account removed from the route.
    const back = await inbound(sys, { ...dm, text: "three" });
    await runOk(sys, back.runId);
    const last = await entryOf(sys, first.sessionKey);
    expect(last.rev).toBeGreaterThan(after.rev);
    expect(last.deliveryContext.accountId).toBeUndefined();
  });

  it("after a sessions.reset writes (the message ends the reset's untouched state)", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "quiet-3" };
    const first = await inbound(sys, { ...dm, text: "one" });
    await runOk(sys, first.runId);
    await sys.rpc("sessions.reset", { key: first.sessionKey });
    const reset = await entryOf(sys, first.sessionKey);
    expect(reset.resetAt).toBeDefined();
    const next = await inbound(sys, { ...dm, text: "two" });
    await runOk(sys, next.runId);
    const after = await entryOf(sys, first.sessionKey);
    expect(after.resetAt).toBeUndefined();
    expect(after.rev).toBeGreaterThan(reset.rev);
    expect(after.sessionId).toBe(reset.sessionId);
  });

  it("past the lag (the minute: a tenth of the 2 h idle window is more) writes its activity", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "quiet-4" };
    const t0 = Date.now();
    const first = await inbound(sys, { ...dm, text: "one", timestamp: t0 });
    await runOk(sys, first.runId);
    const before = await entryOf(sys, first.sessionKey);
    // 59 s later by its timestamp: within the minute, nothing written.
    const near = await inbound(sys, { ...dm, text: "two", timestamp: before.updatedAt + MIN - 1000 });
    await runOk(sys, near.runId);
    expect((await entryOf(sys, first.sessionKey)).rev).toBe(before.rev);
    // 61 s later: written, and updatedAt is that message's time.
    const far = await inbound(sys, { ...dm, text: "three", timestamp: before.updatedAt + MIN + 1000 });
    await runOk(sys, far.runId);
    const after = await entryOf(sys, first.sessionKey);
    expect(after.rev).toBeGreaterThan(before.rev);
    expect(after.updatedAt).toBe(before.updatedAt + MIN + 1000);
  });
});
