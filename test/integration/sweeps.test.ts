/**
 * The maintenance sweep (src/workers/maintenance.ts): stale sessions are rotated without a new
 * message, their old transcripts archived by the archive job; fresh sessions are left alone;
 * the sweep reads only due sessions; it and the lazy check on the next message rotate a
 * session once; and the Job Scheduler is registered by the workers.
 *
 * Sessions get fixed message timestamps in the past (2021: the gateway does not believe one far
 * ahead of its clock) and `sweepOnce` is called with an explicit `now`. They are due by the wall
 * clock, so each test begins once the workers' first scheduled sweep is done; the next is an hour
 * away.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SWEEP_BUSY_RETRY_MS, SWEEP_SCHEDULER_ID, sweepDue, sweepOnce } from "../../src/workers/maintenance.js";
import { rotateSession } from "../../src/rotation/rotate.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { bootSweepDone, entryOf, inbound, runOk, sessionFiles, tool, waitRunning } from "../helpers/api.js";
import { staleAtFor } from "../../src/session/entry-freshness.js";
import { quietPeriod, settle } from "../helpers/settle.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const SWEEP_EVERY = 3_600_000;

const CONFIG = {
  maintenance: { sweepEveryMs: SWEEP_EVERY },
  // The owner the `/send` tests speak as.
  commands: { ownerAllowFrom: ["idlec:owner-send"] },
  session: {
    dmScope: "per-channel-peer" as const,
    reset: { mode: "daily" as const, atHour: 4, timezone: "UTC" },
    resetByChannel: { idlec: { mode: "idle" as const, idleMinutes: 10 }, offc: { mode: "off" as const } },
  },
  agents: {
    defaults: {
      runtime: {
        kind: "script" as const,
        rules: [{ when: { regex: "^slow" }, delayMs: 800, reply: "slow done" }, { reply: "echo: {{text}}" }],
      },
    },
  },
};

let sys: TestSystem;
const systems: TestSystem[] = [];

/** Every test gets its own deployment (prefix, stale index, storage): sweeps see only its sessions. */
beforeEach(async () => {
  sys = await startTestSystem(CONFIG);
  systems.push(sys);
  await bootSweepDone(sys);
});

afterEach(async () => {
  for (const s of systems.splice(0)) await s.close();
});

const idleMsg = (from: string, timestamp: number, text = "hi") => ({
  channel: "idlec",
  chatType: "dm",
  from,
  text,
  timestamp,
});

describe("sweepOnce", () => {
  it("rotates idle-stale sessions without a new message, archives transcripts, leaves fresh ones alone", async () => {
    const T = Date.UTC(2021, 0, 5, 12);
    const stale = await Promise.all(["s1", "s2", "s3"].map((u) => inbound(sys, idleMsg(u, T))));
    const fresh = await inbound(sys, idleMsg("f1", T + 5 * MIN));
    const never = await inbound(sys, { channel: "offc", chatType: "dm", from: "o1", text: "hi", timestamp: T });
    await Promise.all([...stale, fresh, never].map((r) => runOk(sys, r.runId)));

    const r = await sweepOnce(sys.svc, T + 11 * MIN);
    expect(r).toEqual({ examined: 3, rotated: 3, rescheduled: 0, busy: 0 });

    for (const s of stale) {
      const e = await entryOf(sys, s.sessionKey);
      expect(e.sessionId).not.toBe(s.sessionId);
      expect(e.previousSessionId).toBe(s.sessionId);
      expect(e.resetReason).toBe("idle");
      expect(e.updatedAt).toBe(T); // a sweep is not activity
    }
    expect((await entryOf(sys, fresh.sessionKey)).sessionId).toBe(fresh.sessionId);
    expect((await entryOf(sys, never.sessionKey)).sessionId).toBe(never.sessionId);

    await settle(() => stale.every((s) => sessionFiles(sys).some((f) => f.startsWith(`${s.sessionId}.jsonl.reset.`))), {
      what: "every stale session's transcript archived",
      timeoutMs: 10_000,
    });
    for (const s of stale) expect(sessionFiles(sys)).not.toContain(`${s.sessionId}.jsonl`);
    expect(sessionFiles(sys)).toContain(`${fresh.sessionId}.jsonl`);
    expect(sessionFiles(sys)).toContain(`${never.sessionId}.jsonl`);

    // the history of a swept session starts empty
    expect((await sys.rpc("chat.history", { sessionKey: stale[0]!.sessionKey })).messages).toEqual([]);

    // a second sweep at the same instant has nothing to do
    expect(await sweepOnce(sys.svc, T + 11 * MIN)).toMatchObject({ examined: 0, rotated: 0 });
  });

  it("rotates a daily-stale session after the 04:00 boundary (reason daily), not before", async () => {
    const D = Date.UTC(2021, 1, 10);
    const a = await inbound(sys, {
      channel: "tg",
      chatType: "dm",
      from: "daily-sweep",
      text: "hi",
      timestamp: D + 10 * HOUR,
    });
    await runOk(sys, a.runId);
    expect(await sweepOnce(sys.svc, D + DAY + 3 * HOUR + 59 * MIN)).toMatchObject({ rotated: 0 });
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(a.sessionId);

    const r = await sweepOnce(sys.svc, D + DAY + 4 * HOUR + 1);
    expect(r).toMatchObject({ examined: 1, rotated: 1 });
    const e = await entryOf(sys, a.sessionKey);
    expect(e.sessionId).not.toBe(a.sessionId);
    expect(e.resetReason).toBe("daily");
    await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${a.sessionId}.jsonl.reset.`)), {
      what: "the old transcript archived",
      timeoutMs: 10_000,
    });
  });

  it("the next message after a sweep uses the swept session (no second rotation)", async () => {
    const T = Date.UTC(2021, 2, 5, 12);
    const a = await inbound(sys, idleMsg("after-sweep", T));
    await runOk(sys, a.runId);
    const swept = await sweepOnce(sys.svc, T + 20 * MIN);
    expect(swept.rotated).toBe(1);
    const sweptId = (await entryOf(sys, a.sessionKey)).sessionId;
    expect(sweptId).not.toBe(a.sessionId);

    const b = await inbound(sys, idleMsg("after-sweep", T + 21 * MIN, "back"));
    expect(b.sessionId).toBe(sweptId);
    await runOk(sys, b.runId);
    const e = await entryOf(sys, a.sessionKey);
    expect(e.sessionId).toBe(sweptId);
    expect(e.previousSessionId).toBe(a.sessionId);
    const hist = await sys.rpc("chat.history", { sessionKey: a.sessionKey });
    expect(hist.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);

    // and the new session's own idle clock starts at that message
    const c = await inbound(sys, idleMsg("after-sweep", T + 30 * MIN, "still here"));
    expect(c).toMatchObject({ isNewSession: false, sessionId: sweptId });
    const d = await inbound(sys, idleMsg("after-sweep", T + 41 * MIN, "late"));
    expect(d).toMatchObject({ isNewSession: true, resetReason: "idle" });
    await runOk(sys, d.runId);
  });

  it("a swept session nobody writes to is not rotated again and again", async () => {
    const T = Date.UTC(2021, 3, 5, 12);
    const a = await inbound(sys, idleMsg("abandoned", T));
    await runOk(sys, a.runId);
    const first = await sweepOnce(sys.svc, T + 11 * MIN);
    expect(first.rotated).toBe(1);
    const sweptId = (await entryOf(sys, a.sessionKey)).sessionId;

    // Hours later, nothing happened in that session: there is nothing left to reset.
    const later = await sweepOnce(sys.svc, T + 5 * HOUR);
    expect(later.rotated).toBe(0);
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(sweptId);
    const dayLater = await sweepOnce(sys.svc, T + 3 * DAY);
    expect(dayLater.rotated).toBe(0);
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(sweptId);
  });

  it("a sweep racing lazy inbound resets rotates each session exactly once", async () => {
    const T = Date.UTC(2021, 4, 5, 12);
    const users = Array.from({ length: 12 }, (_, i) => `racer${i}`);
    const first = await Promise.all(users.map((u) => inbound(sys, idleMsg(u, T))));
    await Promise.all(first.map((r) => runOk(sys, r.runId)));

    const at = T + 15 * MIN;
    const [sweep, ...replies] = await Promise.all([
      sweepOnce(sys.svc, at),
      ...users.map((u) => inbound(sys, idleMsg(u, at, "again"))),
    ]);
    expect(sweep.rotated).toBeLessThanOrEqual(users.length);
    for (let i = 0; i < users.length; i++) {
      const e = await entryOf(sys, first[i]!.sessionKey);
      expect(e.sessionId, users[i]).not.toBe(first[i]!.sessionId);
      expect(e.previousSessionId, users[i]).toBe(first[i]!.sessionId); // one rotation from the old one
      expect(replies[i]!.sessionId, users[i]).toBe(e.sessionId);
    }
    // Promptly: a turn that meets the archive job at the session lease waits ~1 s, not 30 s.
    await Promise.all(replies.map((r) => runOk(sys, r.runId, 6000)));
    for (let i = 0; i < users.length; i++) {
      const hist = await sys.rpc("chat.history", { sessionKey: first[i]!.sessionKey });
      expect(hist.messages.map((m: { content: unknown }) => m.content)[0]).toBe("again");
    }
    // every old transcript archived exactly once
    await settle(
      () =>
        first.every((r) => sessionFiles(sys).filter((f) => f.startsWith(`${r.sessionId}.jsonl.reset.`)).length === 1),
      { what: "each old transcript archived once", timeoutMs: 10_000 },
    );
    await quietPeriod(200, "no second archive of any old transcript");
    for (const r of first)
      expect(sessionFiles(sys).filter((f) => f.startsWith(`${r.sessionId}.jsonl.reset.`))).toHaveLength(1);
  });

  it("sessions.reset of a stale session: the next message uses the reset session", async () => {
    // Last active a minute ago (wall clock), reset now; the next message comes 2 h later: the
    // old session would be idle-stale by then, but the reset one has had nothing in it.
    const T = Date.now() - MIN;
    const a = await inbound(sys, idleMsg("op-reset", T));
    await runOk(sys, a.runId);
    const reset = await sys.rpc("sessions.reset", { key: a.sessionKey });
    expect(reset.previousSessionId).toBe(a.sessionId);
    const b = await inbound(sys, idleMsg("op-reset", T + 2 * HOUR, "hello again"));
    expect(b.sessionId).toBe(reset.sessionId);
    await runOk(sys, b.runId);
    expect((await entryOf(sys, a.sessionKey)).previousSessionId).toBe(a.sessionId);
    await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${a.sessionId}.jsonl.reset.`)), {
      what: "the reset session's old transcript archived",
      timeoutMs: 10_000,
    });
  });

  it("sessions.reset is activity: a reset session with overrides is indexed stale one window after it", async () => {
    // Finding: overrides kept by sessions.reset (or set after it) outlived the idle expiry,
    // because a session untouched since its reset was fresh forever and left the stale index.
    const T = Date.now() - 5 * MIN;
    const a = await inbound(sys, idleMsg("op-reset-idx", T));
    await runOk(sys, a.runId);
    await sys.rpc("sessions.patch", { key: a.sessionKey, label: "Lidx", thinkingLevel: "high" });
    const before = Date.now();
    await sys.rpc("sessions.reset", { key: a.sessionKey });
    const e = await entryOf(sys, a.sessionKey);
    expect(e).toMatchObject({ label: "Lidx", thinkingLevel: "high" });
    expect(e.resetAt).toBeGreaterThanOrEqual(before);
    // A touch, as OpenClaw's: the reset is the session's last activity for pruning and list order too.
    expect(e.updatedAt).toBe(e.resetAt);
    const staleAt = Number(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey));
    expect(staleAt).toBe(e.resetAt! + 10 * MIN + 1);
  });

  it("an override set after a reset on an empty session indexes it stale one window after the reset", async () => {
    const T = Date.now() - 5 * MIN;
    const a = await inbound(sys, idleMsg("op-patch-idx", T));
    await runOk(sys, a.runId);
    await sys.rpc("sessions.reset", { key: a.sessionKey });
    // Nothing a rollover would clear: fresh, out of the stale index.
    expect(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey)).toBeNull();
    await sys.rpc("sessions.patch", { key: a.sessionKey, label: "Lpatched" });
    const e = await entryOf(sys, a.sessionKey);
    expect(e.label).toBe("Lpatched");
    const staleAt = Number(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey));
    expect(staleAt).toBe(e.resetAt! + 10 * MIN + 1);
  });

  /** Reset (nothing left to clear: out of the stale index), then `write` sets something a rollover clears. */
  async function resetThenWrite(from: string, write: (sessionKey: string) => Promise<unknown>) {
    const a = await inbound(sys, idleMsg(from, Date.now() - 5 * MIN));
    await runOk(sys, a.runId);
    await sys.rpc("sessions.reset", { key: a.sessionKey });
    expect(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey)).toBeNull();
    await write(a.sessionKey);
    const e = await entryOf(sys, a.sessionKey);
    const staleAt = Number(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey));
    expect(staleAt).toBe(e.resetAt! + 10 * MIN + 1); // one idle window after the reset
    // Due then, the sweep rolls it over and clears the setting, as the next message would.
    expect(await sweepOnce(sys.svc, staleAt - 1)).toMatchObject({ rotated: 0 });
    expect(await sweepOnce(sys.svc, staleAt)).toMatchObject({ examined: 1, rotated: 1 });
    return { before: e, after: await entryOf(sys, a.sessionKey) };
  }

  it("/send on a session untouched since its reset puts it back on the stale clock", async () => {
    // Finding: /send wrote the policy without the stale instant: the sweep never found the
    // session, and the policy outlived the idle expiry until the next message.
    const { before, after } = await resetThenWrite("owner-send", async () => {
      expect(await inbound(sys, idleMsg("owner-send", Date.now(), "/send on"))).toMatchObject({ sendPolicy: "allow" });
    });
    expect(before.sendPolicy).toBe("allow");
    expect(after.sendPolicy).toBeUndefined();
  });

  it("a model set by session_status on a session untouched since its reset: back on the stale clock", async () => {
    const { before, after } = await resetThenWrite("status-model", async (key) => {
      expect((await tool(sys, "session_status", key, { model: "openai/gpt-5" })).details.changedModel).toBe(true);
    });
    expect(before.modelOverride).toBe("openai/gpt-5");
    expect(after.modelOverride).toBeUndefined();
  });

  it("an isolated run's session is on the stale clock once its turn has run (its run state)", async () => {
    // The run rotates the session (untouched since, nothing to clear); its turn's bookkeeping
    // then writes run state a rollover clears, which must index it as freshnessOf sees it.
    const r = await sys.rpc("agent", { sessionKey: "cron:iso-sweep", message: "run", sessionTarget: "isolated" });
    await runOk(sys, r.runId);
    // The bookkeeping is written right after the run's record turns terminal.
    const e = (await settle(
      async () => ((await entryOf(sys, r.sessionKey)).systemSent ? entryOf(sys, r.sessionKey) : undefined),
      {
        what: "the turn's bookkeeping written",
        timeoutMs: 5000,
      },
    ))!;
    expect(e.sessionId).toBe(r.sessionId);
    expect(e.resetAt).toBeGreaterThanOrEqual(e.updatedAt);
    const staleAt = await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), r.sessionKey);
    expect(Number(staleAt)).toBe(staleAtFor(sys.svc.config, r.sessionKey, e.resetAt!));
    expect(await sweepOnce(sys.svc, Number(staleAt))).toMatchObject({ rotated: 1 });
  });

  it("a session the agent RPC creates is on the stale clock from its creation", async () => {
    // Its first turn's activity write is skipped (recent), so nothing else would index it.
    const r = await sys.rpc("agent", { sessionKey: "cron:created-once", message: "run" });
    await runOk(sys, r.runId);
    const e = await entryOf(sys, r.sessionKey);
    const staleAt = await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), r.sessionKey);
    expect(Number(staleAt)).toBe(staleAtFor(sys.svc.config, r.sessionKey, e.createdAt));
  });

  it("a message one window after a reset rolls the session over and clears what the reset kept", async () => {
    const T = Date.UTC(2021, 6, 5, 12);
    const ovr = await inbound(sys, idleMsg("op-reset-ovr", T));
    const kept = await inbound(sys, idleMsg("op-reset-kept", T));
    await Promise.all([runOk(sys, ovr.runId), runOk(sys, kept.runId)]);
    for (const r of [ovr, kept]) {
      await sys.rpc("sessions.patch", { key: r.sessionKey, label: `L-${r.sessionId}`, thinkingLevel: "high" });
      // What sessions.reset does, at an instant of the test's choosing.
      await rotateSession(sys.svc, await entryOf(sys, r.sessionKey), {
        reason: "reset",
        now: T + HOUR,
        archive: "job",
        activity: "preserve",
      });
    }
    // Past the window of the last message but within the reset's: the reset session goes on.
    const b = await inbound(sys, idleMsg("op-reset-kept", T + HOUR + 9 * MIN, "still there"));
    expect(b).toMatchObject({ isNewSession: false });
    await runOk(sys, b.runId);
    expect((await entryOf(sys, kept.sessionKey)).thinkingLevel).toBe("high");
    // Past the reset's window: an idle rollover, which clears the overrides the reset kept.
    const c = await inbound(sys, idleMsg("op-reset-ovr", T + HOUR + 10 * MIN + 1, "later"));
    expect(c).toMatchObject({ isNewSession: true, resetReason: "idle" });
    await runOk(sys, c.runId);
    const rolled = await entryOf(sys, ovr.sessionKey);
    expect(rolled.label).toBeUndefined();
    expect(rolled.thinkingLevel).toBeUndefined();
  });

  it("the sweep rolls over a reset session whose overrides outlive the window, once", async () => {
    const T = Date.UTC(2021, 6, 6, 12);
    const a = await inbound(sys, idleMsg("op-reset-sweep", T));
    await runOk(sys, a.runId);
    await sys.rpc("sessions.patch", { key: a.sessionKey, label: "Lsweep" });
    const reset = await rotateSession(sys.svc, await entryOf(sys, a.sessionKey), {
      reason: "reset",
      now: T + HOUR,
      archive: "job",
      activity: "preserve",
    });
    expect(await sweepOnce(sys.svc, T + HOUR + 10 * MIN)).toMatchObject({ examined: 0, rotated: 0 });
    expect(await sweepOnce(sys.svc, T + HOUR + 10 * MIN + 1)).toMatchObject({ examined: 1, rotated: 1 });
    const e = await entryOf(sys, a.sessionKey);
    expect(e).toMatchObject({ previousSessionId: reset!.sessionId, resetReason: "idle", updatedAt: T });
    expect(e.label).toBeUndefined();
    // Nothing left to clear: not rolled over again, and out of the stale index.
    expect(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey)).toBeNull();
    expect(await sweepOnce(sys.svc, T + 3 * DAY)).toMatchObject({ rotated: 0 });
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(e.sessionId);
  });

  it("a stale session is not rotated under a queued/running turn (later it is; the archive has it whole)", async () => {
    const T = Date.UTC(2021, 3, 25, 12);
    const a = await inbound(sys, idleMsg("busy", T, "slow work"));
    await waitRunning(sys, a.runId, 5000);
    const queued = await inbound(sys, idleMsg("busy", T + MIN, "slow more"));
    expect(queued.sessionId).toBe(a.sessionId);

    const during = await sweepOnce(sys.svc, T + 30 * MIN);
    expect(during).toMatchObject({ examined: 1, rotated: 0, busy: 1 });
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(a.sessionId);

    await runOk(sys, a.runId);
    await runOk(sys, queued.runId);
    await settle(async () => !(await sys.svc.inbox.hasInflight(a.sessionKey)), {
      what: "no turn of the session in flight",
      timeoutMs: 5000,
    });
    // A busy one is looked at again a minute later, not first by every sweep (others come first).
    expect(await sweepOnce(sys.svc, T + 30 * MIN)).toMatchObject({ examined: 0 });
    const after = await sweepOnce(sys.svc, T + 30 * MIN + SWEEP_BUSY_RETRY_MS);
    expect(after).toMatchObject({ examined: 1, rotated: 1, busy: 0 });
    const archived = await settle(() => sessionFiles(sys).find((f) => f.startsWith(`${a.sessionId}.jsonl.reset.`)), {
      what: "the stale session's transcript archived",
      timeoutMs: 10_000,
    });
    const lines = readFileSync(join(sys.config.storage.dir, "agents", "main", "sessions", archived!), "utf8")
      .trim()
      .split("\n");
    expect(lines.map((l) => JSON.parse(l).message?.role ?? JSON.parse(l).type)).toEqual([
      "session",
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
    expect(sessionFiles(sys)).not.toContain(`${a.sessionId}.jsonl`);
  });

  it("the archive job waits for a busy session, and archives soon after it is free", async () => {
    const a = await inbound(sys, idleMsg("lease-wait", Date.now()));
    await runOk(sys, a.runId);
    // Hold the session lease as a drain running a long turn would.
    const held = await settle(
      async () => {
        const r = await sys.svc.leases.tryAcquire(a.sessionKey);
        return r.acquired ? r.lease : undefined;
      },
      { what: "the session lease taken", timeoutMs: 5000 },
    );
    await sys.rpc("sessions.reset", { key: a.sessionKey });
    await quietPeriod(600, "the archive job does not move the file while the lease is held");
    expect(sessionFiles(sys)).toContain(`${a.sessionId}.jsonl`); // not moved under the holder's feet
    await held!.release();
    const t0 = Date.now();
    await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${a.sessionId}.jsonl.reset.`)), {
      what: "the transcript archived once the lease is free",
      timeoutMs: 10_000,
    });
    expect(Date.now() - t0).toBeLessThan(3000); // not the 30 s lease TTL
  });

  it("a muted session stays muted: the sweep rotates it with its mute, as no message can lift it", async () => {
    const T = Date.UTC(2021, 0, 7, 12);
    const muted = await inbound(sys, idleMsg("muted", T));
    await runOk(sys, muted.runId);
    await sys.rpc("sessions.patch", { key: muted.sessionKey, sendPolicy: "deny" });
    // Before the sweep, a message is blocked (and rotates nothing)...
    const blocked = await sys.post("/v1/inbound", idleMsg("muted", T + 11 * MIN, "still there?"));
    expect(blocked.body).toMatchObject({ blocked: "send_policy_deny" });

    expect(await sweepOnce(sys.svc, T + 11 * MIN)).toMatchObject({ rotated: 1 });
    const e = await entryOf(sys, muted.sessionKey);
    expect(e.sessionId).not.toBe(muted.sessionId);
    expect(e.sendPolicy).toBe("deny");
    // ...and after it, too.
    const after = await sys.post("/v1/inbound", idleMsg("muted", T + 12 * MIN, "hello again"));
    expect(after.body).toMatchObject({ blocked: "send_policy_deny" });
  });

  it("a session touched after it was indexed is rescheduled, not rotated", async () => {
    const T = Date.UTC(2021, 5, 5, 12);
    const a = await inbound(sys, idleMsg("toucher", T));
    await runOk(sys, a.runId);
    // Simulate an index entry that is older than the session's activity (e.g. a policy change).
    await sys.svc.redis.zadd(sys.svc.keys.staleIndex(), T + MIN, a.sessionKey);
    const r = await sweepOnce(sys.svc, T + 2 * MIN);
    expect(r).toMatchObject({ examined: 1, rotated: 0, rescheduled: 1 });
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(a.sessionId);
    expect(await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), a.sessionKey)).toBe(String(T + 10 * MIN + 1));
  });
});

describe("sweep cost", () => {
  it("examines only due sessions: 200 fresh + 5 stale → examined 5", async () => {
    const own = sys;
    const T = Date.UTC(2021, 6, 5, 12);
    const staleRes = await Promise.all(Array.from({ length: 5 }, (_, i) => inbound(own, idleMsg(`old${i}`, T))));
    const freshRes: { sessionKey: string; sessionId: string; runId: string }[] = [];
    for (let batch = 0; batch < 10; batch++) {
      freshRes.push(
        ...(await Promise.all(
          Array.from({ length: 20 }, (_, i) => inbound(own, idleMsg(`new${batch}-${i}`, T + 8 * MIN))),
        )),
      );
    }
    expect(freshRes).toHaveLength(200);
    await Promise.all(staleRes.map((r) => runOk(own, r.runId)));

    const r = await sweepOnce(own.svc, T + 12 * MIN);
    expect(r).toEqual({ examined: 5, rotated: 5, rescheduled: 0, busy: 0 });
    for (const s of staleRes) expect((await entryOf(own, s.sessionKey)).sessionId).not.toBe(s.sessionId);
    for (const s of freshRes.filter((_, i) => i % 20 === 0))
      expect((await entryOf(own, s.sessionKey)).sessionId).toBe(s.sessionId);
    expect(await own.svc.sessions.count()).toBe(205);
    await Promise.all(freshRes.map((x) => own.rpc("agent.wait", { runId: x.runId, timeoutMs: 20_000 })));
  });
});

describe("scheduler", () => {
  it("the scheduled sweep rotates a session that went stale in real time", async () => {
    // The session is made stale and idle before sweeps come every second: a sweep that finds it
    // with its turn queued or running leaves it for a minute (SWEEP_BUSY_RETRY_MS), longer than
    // this test waits. So first in this test's deployment, which sweeps sys (its boot sweep done).
    const a = await inbound(sys, idleMsg("realtime", Date.now() - 12 * MIN)); // idle 10 min: already stale
    await runOk(sys, a.runId);
    // A worker joins with sweeps every second: it re-registers the deployment's one sweep schedule.
    const fast = await startTestSystem(
      {
        ...CONFIG,
        maintenance: { sweepEveryMs: 1000 },
        redis: { prefix: sys.config.redis.prefix },
        storage: { dir: sys.config.storage.dir },
      },
      { workers: {} },
    );
    systems.push(fast);
    const e = await settle(
      async () => {
        const cur = await entryOf(sys, a.sessionKey);
        return cur.sessionId !== a.sessionId ? cur : undefined;
      },
      { what: "the scheduled sweep rotated the session", timeoutMs: 8000 },
    );
    expect(e).toMatchObject({ previousSessionId: a.sessionId, resetReason: "idle" });
    await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${a.sessionId}.jsonl.reset.`)), {
      what: "the rotated transcript archived",
      timeoutMs: 8000,
    });
    // and it stays put: later sweeps find nothing to do in an untouched session
    await quietPeriod(1500, "later sweeps (every 1 s) leave the untouched new session alone");
    expect((await entryOf(sys, a.sessionKey)).sessionId).toBe(e!.sessionId);
  });

  it("the sweep Job Scheduler is registered in the maintenance queue once workers start", async () => {
    const schedulers = await sys.svc.queues.maintenance.getJobSchedulers();
    const sweep = schedulers.filter((s) => s.key === SWEEP_SCHEDULER_ID || s.id === SWEEP_SCHEDULER_ID);
    expect(sweep).toHaveLength(1);
    expect(Number(sweep[0]!.every)).toBe(SWEEP_EVERY);
    expect(sweep[0]!.name).toBe("sweep");
    // a peer worker registering again does not add a second one
    const peer = await startTestSystem(
      { ...CONFIG, redis: { prefix: sys.config.redis.prefix }, storage: { dir: sys.config.storage.dir } },
      { workers: {} },
    );
    systems.push(peer);
    expect(
      (await sys.svc.queues.maintenance.getJobSchedulers()).filter(
        (s) => s.key === SWEEP_SCHEDULER_ID || s.id === SWEEP_SCHEDULER_ID,
      ),
    ).toHaveLength(1);
    expect(await sys.svc.queues.maintenance.getJobSchedulersCount()).toBe(1);
  });
});

describe("the sweep job works off a backlog", () => {
  it("batch after batch within its time budget, and says how many are still due", async () => {
    const small = await startTestSystem({ ...CONFIG, maintenance: { sweepEveryMs: SWEEP_EVERY, sweepBatch: 5 } });
    systems.push(small);
    const T = Date.UTC(2021, 3, 1, 12);
    for (let i = 0; i < 12; i++) await runOk(small, (await inbound(small, idleMsg(`backlog${i}`, T + i))).runId);
    // No budget: one batch, and the rest is reported as still due.
    const one = await sweepDue(small.svc, 0);
    expect(one).toMatchObject({ batches: 1, rotated: 5, remaining: 7 });
    // A budget: batches until the due list runs dry (the last one not full).
    const rest = await sweepDue(small.svc, 60_000);
    expect(rest).toMatchObject({ batches: 2, rotated: 7, remaining: 0 });
  });
});
