/**
 * `resetByChannel` follows the channel of the arriving message, as OpenClaw's initSessionState
 * does, not the channel the session last saw: one DM session (dmScope per-peer) reached from
 * Telegram (daily at 04:00) and Discord (idle, 7 days). The sweep, which has no message, keeps
 * using the channel stored on the entry.
 *
 * Times: fixed timestamps in 2021 (the gateway does not believe one far ahead of its clock): due
 * by the wall clock, so the tests begin once the workers' first sweep is done (the next is an hour away).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshnessOf } from "../../src/session/entry-freshness.js";
import { bootSweepDone, entryOf, inbound, waitRun } from "../helpers/api.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

const DAY = 86_400_000;
const T = Date.UTC(2021, 0, 5, 12);

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    commands: { ownerAllowFrom: ["discord:owner"] },
    session: {
      dmScope: "per-peer",
      reset: { mode: "daily", atHour: 4, timezone: "UTC" },
      resetByChannel: { discord: { mode: "idle", idleMinutes: 10_080 } },
    },
  });
  await bootSweepDone(sys);
});

afterAll(async () => {
  await sys?.close();
});

const dm = (channel: string, from: string, text: string, timestamp: number) => ({
  channel,
  chatType: "dm",
  from,
  text,
  timestamp,
});

describe("resetByChannel uses the arriving message's channel", () => {
  it("Discord a day after Telegram keeps the session; Telegram days later rolls it over (daily)", async () => {
    const a = await inbound(sys, dm("telegram", "rbc1", "hi from telegram", T));
    await waitRun(sys, a.runId);
    // Discord's policy (idle 7 days) applies: the 04:00 boundary crossed since does not matter.
    const b = await inbound(sys, dm("discord", "rbc1", "hi from discord next day", T + DAY));
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    await waitRun(sys, b.runId);
    // Telegram's policy (daily) applies even though the session last saw Discord.
    const c = await inbound(sys, dm("telegram", "rbc1", "telegram 3 days later", T + 4 * DAY));
    expect(c).toMatchObject({ isNewSession: true, resetReason: "daily" });
    expect(c.sessionId).not.toBe(a.sessionId);
    await waitRun(sys, c.runId);
  });

  it("/send from Discord the next day sets the policy on the same session (no rollover)", async () => {
    const a = await inbound(sys, dm("telegram", "owner", "hi", T));
    await waitRun(sys, a.runId);
    const b = await inbound(sys, dm("discord", "owner", "/send off", T + DAY));
    expect(b).toMatchObject({ command: "send", sessionId: a.sessionId });
    expect(await entryOf(sys, a.sessionKey)).toMatchObject({ sessionId: a.sessionId, sendPolicy: "deny" });
  });

  it("without a channel argument (the sweep) the entry's own channel decides", async () => {
    const entry = { key: "agent:main:direct:x", sessionId: "s", updatedAt: T, channel: "discord" } as never;
    expect(freshnessOf(sys.config, entry, T + DAY).fresh).toBe(true);
    expect(freshnessOf(sys.config, entry, T + DAY, "telegram")).toMatchObject({ fresh: false, staleReason: "daily" });
  });
});
