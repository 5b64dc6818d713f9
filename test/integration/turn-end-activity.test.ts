/**
 * A turn counts as activity until it ends (OpenClaw sets updatedAt when the run ends): a turn
 * longer than the idle window must not leave the user's follow-up to its reply in a new session.
 * A short turn writes nothing more (the same lag rule as a turn's activity, turn-session.ts).
 *
 * Times: messages carry timestamps a little in the past, so an idle window of one minute can be
 * crossed without waiting a minute; a turn's end counts on its message's clock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryOf, inbound, runOk } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";

const SEC = 1000;
let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    session: { dmScope: "per-channel-peer", reset: { mode: "idle", idleMinutes: 1 } },
    agents: {
      defaults: {
        runtime: {
          kind: "script",
          rules: [
            // Longer than a tenth of the idle window (6 s): the activity lag a turn may leave.
            { when: { regex: "^long" }, delayMs: 7000, reply: "long done" },
            { when: { regex: "^short" }, delayMs: 1000, reply: "short done" },
            { reply: "echo: {{text}}" },
          ],
        },
      },
    },
  });
});

afterAll(async () => {
  await sys?.close();
});

function dm(from: string, text: string, timestamp: number) {
  return { channel: "tg", chatType: "dm", from, text, timestamp };
}

describe("a turn's end is activity", () => {
  it("a turn longer than the lag moves updatedAt to its end: the follow-up stays in the session", async () => {
    // The message was sent 50 s ago; its 7 s turn ends 57 s after it.
    const T = Date.now() - 50 * SEC;
    const a = await inbound(sys, dm("long1", "long question", T));
    expect(a.isNewSession).toBe(true);
    await runOk(sys, a.runId, 30_000);
    await settle(async () => (await entryOf(sys, a.sessionKey)).updatedAt >= T + 7 * SEC, {
      what: "updatedAt moved to the turn's end",
      timeoutMs: 5000,
    });
    const entry = await entryOf(sys, a.sessionKey);
    expect(entry.updatedAt).toBeLessThan(T + 20 * SEC);
    // The follow-up, 63 s after the first message and 56 s after the reply: inside the window.
    const b = await inbound(sys, dm("long1", "thanks", T + 63 * SEC));
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    expect(b.resetReason).toBeUndefined();
    // The stale index moved with it: not due a minute after the first message.
    expect(await sys.svc.sessions.dueStale(T + 62 * SEC, 1000)).not.toContain(a.sessionKey);
    await runOk(sys, b.runId);
  }, 60_000);

  it("a short turn writes nothing after the run's first bookkeeping", async () => {
    const T = Date.now() - 10 * SEC;
    const a = await inbound(sys, dm("short1", "hello", T));
    await runOk(sys, a.runId);
    await settle(async () => (await entryOf(sys, a.sessionKey)).systemSent === true, { what: "first bookkeeping" });
    const b = await inbound(sys, dm("short1", "short one", T + 1000));
    const rev = (await entryOf(sys, a.sessionKey)).rev;
    await runOk(sys, b.runId);
    await new Promise((r) => setTimeout(r, 500));
    const after = await entryOf(sys, a.sessionKey);
    expect(after.rev).toBe(rev);
    // The message itself, a second after the last activity and changing nothing else, wrote
    // nothing either (its activity lags by less than the minute a turn's may).
    expect(after.updatedAt).toBe(T);
  });
});
