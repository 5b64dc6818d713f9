/**
 * POST /v1/inbound end to end (gateway + workers in this process, real Redis): session keys,
 * freshness at the message `timestamp`, reset triggers with the greeting turn and archiving,
 * the standalone commands (/send, /status, /stop), sendPolicy, messageId de-dup, validation,
 * recorded routes, and concurrent rotation.
 *
 * Times: every freshness test uses fixed timestamps in the future (2031+). The maintenance
 * sweep of the running workers evaluates at the wall clock, so it can never find these
 * sessions due and rotate them behind a test's back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepOnce } from "../../src/workers/maintenance.js";
import { httpJson, startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryOf, history, inbound, sessionFiles, waitRun, waitRunning } from "../helpers/api.js";

const GREETING = "A new session was started via /new or /reset";
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

let sys: TestSystem;
const extra: TestSystem[] = [];

beforeAll(async () => {
  sys = await startTestSystem({
    maintenance: { sweepEveryMs: 3_600_000 },
    // Timestamps up to a week ahead count (a test moves a session two days on); years ahead do not.
    gateway: { limits: { timestampAheadMs: 7 * DAY } },
    // `/send` is owner-only: these senders are the owners the /send tests speak as.
    commands: { ownerAllowFrom: ["tg:sender", "sender2", "quietchan:u1", "dedup3", "stale-owner"] },
    session: {
      dmScope: "per-channel-peer",
      reset: { mode: "daily", atHour: 4, timezone: "UTC" },
      resetByChannel: { idlechan: { mode: "idle", idleMinutes: 30 }, offchan: { mode: "off" } },
      sendPolicy: {
        rules: [
          { action: "deny", match: { channel: "quietchan", chatType: "group" } },
          { action: "deny", match: { channel: "hushchan", chatType: "direct" } },
        ],
      },
    },
    agents: {
      defaults: {
        runtime: {
          kind: "script",
          rules: [
            { when: { regex: "^slow" }, delayMs: 4000, reply: "slow done: {{text}}" },
            { reply: "echo: {{text}}" },
          ],
        },
      },
    },
  });
});

afterAll(async () => {
  for (const s of extra) await s.close();
  await sys?.close();
});

function dm(from: string, text: string, more: Record<string, unknown> = {}) {
  return { channel: "tg", chatType: "dm", from, text, ...more };
}

function textOf(m: { content: unknown }): string {
  if (typeof m.content === "string") return m.content;
  return (m.content as { type: string; text?: string }[]).map((b) => b.text ?? "").join("");
}

async function gatewayOnly(session: Record<string, unknown>): Promise<TestSystem> {
  const s = await startTestSystem({ session }, { gateway: true, workers: false });
  extra.push(s);
  return s;
}

describe("session keys through POST /v1/inbound", () => {
  it("dmScope per-channel-peer, groups, channels, topics and threads", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ channel: "tg", chatType: "dm", from: "Alice", text: "hi" }, "agent:main:tg:dm:alice"],
      [{ channel: "tg", chatType: "direct", from: "alice2", text: "hi" }, "agent:main:tg:dm:alice2"],
      [
        { channel: "discord", chatType: "group", from: "u1", groupId: "G-1", text: "hi" },
        "agent:main:discord:group:g-1",
      ],
      [{ channel: "slack", chatType: "channel", from: "u1", groupId: "C9", text: "hi" }, "agent:main:slack:channel:c9"],
      [
        { channel: "telegram", chatType: "group", from: "u1", groupId: -100123, threadId: 7, text: "hi" },
        "agent:main:telegram:group:-100123:topic:7",
      ],
      [
        { channel: "discord", chatType: "group", from: "u1", groupId: "g-1", threadId: "T9", text: "hi" },
        "agent:main:discord:group:g-1:thread:t9",
      ],
      [{ channel: "tg", chatType: "dm", from: "bob", threadId: "x1", text: "hi" }, "agent:main:tg:dm:bob:thread:x1"],
    ];
    for (const [body, key] of cases) {
      const res = await inbound(sys, body);
      expect(res, JSON.stringify(body)).toMatchObject({
        ok: true,
        agentId: "main",
        sessionKey: key,
        isNewSession: true,
      });
      expect(typeof res.runId).toBe("string");
      expect((await entryOf(sys, key)).sessionId).toBe(res.sessionId);
    }
  });

  it("dmScope main, per-peer (with identityLinks) and per-account-channel-peer", async () => {
    const main = await gatewayOnly({ dmScope: "main" });
    const perPeer = await gatewayOnly({ dmScope: "per-peer", identityLinks: { alice: ["telegram:123"] } });
    const perAcct = await gatewayOnly({ dmScope: "per-account-channel-peer" });

    expect((await inbound(main, { channel: "telegram", chatType: "dm", from: "123", text: "x" })).sessionKey).toBe(
      "agent:main:main",
    );
    expect((await inbound(main, { channel: "discord", chatType: "dm", from: "999", text: "x" })).sessionKey).toBe(
      "agent:main:main",
    );

    expect((await inbound(perPeer, { channel: "telegram", chatType: "dm", from: "123", text: "x" })).sessionKey).toBe(
      "agent:main:dm:alice",
    );
    expect((await inbound(perPeer, { channel: "discord", chatType: "dm", from: "123", text: "x" })).sessionKey).toBe(
      "agent:main:dm:123",
    );
    expect((await inbound(perPeer, { channel: "discord", chatType: "dm", from: "U7", text: "x" })).sessionKey).toBe(
      "agent:main:dm:u7",
    );

    expect(
      (await inbound(perAcct, { channel: "tg", chatType: "dm", from: "u1", accountId: "Bot2", text: "x" })).sessionKey,
    ).toBe("agent:main:tg:bot2:dm:u1");
    expect((await inbound(perAcct, { channel: "tg", chatType: "dm", from: "u1", text: "x" })).sessionKey).toBe(
      "agent:main:tg:default:dm:u1",
    );
    // a group is keyed by its group whatever the dmScope
    expect(
      (await inbound(main, { channel: "tg", chatType: "group", from: "u1", groupId: "g", text: "x" })).sessionKey,
    ).toBe("agent:main:tg:group:g");
  });
});

describe("freshness at the message timestamp", () => {
  it("a timestamp years ahead of the gateway's clock is not believed: it cannot switch off resets", async () => {
    const now = Date.now();
    const a = await inbound(sys, dm("future1", "from the future", { timestamp: now + 10 * 365 * DAY }));
    const entry = await entryOf(sys, a.sessionKey);
    // The gateway's clock counted instead: the daily reset still comes at the next boundary.
    expect(entry.updatedAt).toBeGreaterThanOrEqual(now);
    expect(entry.updatedAt).toBeLessThan(now + 60_000);
    const b = await inbound(sys, dm("future1", "two days on", { timestamp: now + 2 * DAY }));
    expect(b).toMatchObject({ isNewSession: true, resetReason: "daily" });
    await waitRun(sys, b.runId);
  });

  it("daily at 04:00 UTC: D 10:00 → D+1 03:00 reuses, D+1 05:00 starts a new session (daily)", async () => {
    const D = Date.UTC(2021, 2, 10); // midnight UTC of day D
    const a = await inbound(sys, dm("daily1", "one", { timestamp: D + 10 * HOUR }));
    expect(a).toMatchObject({ isNewSession: true });
    expect(a.resetReason).toBeUndefined();
    const b = await inbound(sys, dm("daily1", "two", { timestamp: D + DAY + 3 * HOUR }));
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    expect(b.resetReason).toBeUndefined();
    const c = await inbound(sys, dm("daily1", "three", { timestamp: D + DAY + 5 * HOUR }));
    expect(c).toMatchObject({ isNewSession: true, resetReason: "daily" });
    expect(c.sessionId).not.toBe(a.sessionId);

    const entry = await entryOf(sys, a.sessionKey);
    expect(entry.sessionId).toBe(c.sessionId);
    expect(entry.previousSessionId).toBe(a.sessionId);
    expect(entry.resetReason).toBe("daily");
    expect(entry.updatedAt).toBe(D + DAY + 5 * HOUR); // updatedAt takes the message time
    await waitRun(sys, c.runId);
  });

  it("a message stamped before the rollover but arriving after it does not roll the session over again", async () => {
    const D = Date.UTC(2021, 7, 10);
    const a = await inbound(sys, dm("late-boundary", "before four", { timestamp: D + 3 * HOUR + 59 * MIN }));
    await waitRun(sys, a.runId);
    // The sweep rolls the session over just after the 04:00 boundary.
    await sweepOnce(sys.svc, D + 4 * HOUR + 1000);
    const rolled = await entryOf(sys, a.sessionKey);
    expect(rolled.sessionId).not.toBe(a.sessionId);
    // A message the channel delivers late, sent 5 s before the boundary: it joins the new session...
    const b = await inbound(sys, dm("late-boundary", "late", { timestamp: D + 4 * HOUR - 5000 }));
    expect(b).toMatchObject({ isNewSession: false, sessionId: rolled.sessionId });
    await waitRun(sys, b.runId);
    // ...and counts no earlier than that session's reset: the same boundary never rolls it again.
    await sweepOnce(sys.svc, D + 4 * HOUR + 2 * MIN);
    const entry = await entryOf(sys, a.sessionKey);
    expect(entry.sessionId).toBe(rolled.sessionId);
    expect(entry.updatedAt).toBeGreaterThanOrEqual(rolled.resetAt);
    // The next day's boundary still does.
    const c = await inbound(sys, dm("late-boundary", "tomorrow", { timestamp: D + DAY + 5 * HOUR }));
    expect(c).toMatchObject({ isNewSession: true, resetReason: "daily" });
    await waitRun(sys, c.runId);
  });

  it("a message with an older timestamp never rewinds updatedAt", async () => {
    const T = Date.UTC(2021, 4, 1, 12);
    const a = await inbound(sys, dm("rewind", "one", { timestamp: T }));
    const b = await inbound(sys, dm("rewind", "late", { timestamp: T - HOUR }));
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    expect((await entryOf(sys, a.sessionKey)).updatedAt).toBe(T);
  });

  it("idle mode (resetByChannel idle 30 min): 29 min gap reuses, 31 min gap starts a new session (idle)", async () => {
    const T = Date.UTC(2021, 5, 1, 12);
    const a = await inbound(sys, { channel: "idlechan", chatType: "dm", from: "idler", text: "one", timestamp: T });
    const b = await inbound(sys, {
      channel: "idlechan",
      chatType: "dm",
      from: "idler",
      text: "two",
      timestamp: T + 29 * MIN,
    });
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    // Idle-only: crossing 04:00 does not reset (29 min after the last message).
    const c = await inbound(sys, {
      channel: "idlechan",
      chatType: "dm",
      from: "idler",
      text: "three",
      timestamp: T + 58 * MIN,
    });
    expect(c).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    const d = await inbound(sys, {
      channel: "idlechan",
      chatType: "dm",
      from: "idler",
      text: "four",
      timestamp: T + 58 * MIN + 31 * MIN,
    });
    expect(d).toMatchObject({ isNewSession: true, resetReason: "idle" });
    expect(d.sessionId).not.toBe(a.sessionId);
  });

  it("idle mode does not reset at the daily boundary", async () => {
    const D = Date.UTC(2021, 5, 10);
    const a = await inbound(sys, {
      channel: "idlechan",
      chatType: "dm",
      from: "nightowl",
      text: "one",
      timestamp: D + 3 * HOUR + 50 * MIN,
    });
    const b = await inbound(sys, {
      channel: "idlechan",
      chatType: "dm",
      from: "nightowl",
      text: "two",
      timestamp: D + 4 * HOUR + 10 * MIN,
    });
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
  });

  it('mode "off" never resets by time', async () => {
    const T = Date.UTC(2021, 6, 1, 12);
    const a = await inbound(sys, { channel: "offchan", chatType: "dm", from: "forever", text: "one", timestamp: T });
    const b = await inbound(sys, {
      channel: "offchan",
      chatType: "dm",
      from: "forever",
      text: "two",
      timestamp: T + 40 * DAY,
    });
    expect(b).toMatchObject({ isNewSession: false, sessionId: a.sessionId });
    // explicit triggers still work
    const c = await inbound(sys, {
      channel: "offchan",
      chatType: "dm",
      from: "forever",
      text: "/new",
      timestamp: T + 41 * DAY,
    });
    expect(c).toMatchObject({ isNewSession: true, resetReason: "new" });
  });
});

describe("reset triggers", () => {
  it("bare /new rotates, runs the greeting turn and archives the old transcript", async () => {
    const first = await inbound(sys, dm("resetter", "remember me"));
    expect((await waitRun(sys, first.runId)).status).toBe("ok");
    expect(sessionFiles(sys)).toContain(`${first.sessionId}.jsonl`);

    const res = await inbound(sys, dm("resetter", "/new"));
    expect(res).toMatchObject({ isNewSession: true, resetReason: "new" });
    expect(res.sessionId).not.toBe(first.sessionId);
    const done = await waitRun(sys, res.runId);
    expect(done.status).toBe("ok");

    const msgs = await history(sys, res.sessionKey);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(textOf(msgs[0]!)).toContain(GREETING);
    expect(textOf(msgs[0]!)).toMatch(/Current time: .* \(UTC\) \/ \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/);
    expect(JSON.stringify(msgs)).not.toContain("remember me");

    const files = sessionFiles(sys);
    expect(files).not.toContain(`${first.sessionId}.jsonl`);
    const archived = files.filter((f) => f.startsWith(`${first.sessionId}.jsonl.reset.`));
    expect(archived).toHaveLength(1);
    expect(archived[0]).toMatch(/\.jsonl\.reset\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}Z$/);
    expect(files).toContain(`${res.sessionId}.jsonl`);
  });

  it("/new <text> runs <text> in the new session; /RESET (any case) rotates with reason reset", async () => {
    const first = await inbound(sys, dm("resetter2", "old stuff"));
    await waitRun(sys, first.runId);
    const withText = await inbound(sys, dm("resetter2", "/new hello there"));
    expect(withText).toMatchObject({ isNewSession: true, resetReason: "new" });
    const w = await waitRun(sys, withText.runId);
    expect(w).toMatchObject({ status: "ok", reply: "echo: hello there" });
    const msgs = await history(sys, withText.sessionKey);
    expect(msgs.map(textOf)).toEqual(["hello there", "echo: hello there"]);

    const upper = await inbound(sys, dm("resetter2", "/RESET"));
    expect(upper).toMatchObject({ isNewSession: true, resetReason: "reset" });
    expect(upper.sessionId).not.toBe(withText.sessionId);
    await waitRun(sys, upper.runId);
    expect(textOf((await history(sys, upper.sessionKey))[0]!)).toContain(GREETING);
    const files = sessionFiles(sys);
    expect(files.some((f) => f.startsWith(`${first.sessionId}.jsonl.reset.`))).toBe(true);
    expect(files.some((f) => f.startsWith(`${withText.sessionId}.jsonl.reset.`))).toBe(true);

    // not a trigger: /newer is an ordinary message in the same session
    const plain = await inbound(sys, dm("resetter2", "/newer things"));
    expect(plain).toMatchObject({ isNewSession: false, sessionId: upper.sessionId });
    await waitRun(sys, plain.runId);
  });
});

describe("/send, /status and sendPolicy", () => {
  it("/send off blocks the next message (no run, no transcript line); /send inherit re-enables", async () => {
    const first = await inbound(sys, dm("sender", "hello"));
    await waitRun(sys, first.runId);
    const before = await history(sys, first.sessionKey);
    expect(before).toHaveLength(2);

    const off = await inbound(sys, dm("sender", "/send off"));
    expect(off).toMatchObject({ ok: true, command: "send", sendPolicy: "deny", sessionId: first.sessionId });
    expect(off.runId).toBeUndefined();
    expect((await entryOf(sys, first.sessionKey)).sendPolicy).toBe("deny");

    const blocked = await inbound(sys, dm("sender", "are you there?"));
    expect(blocked).toEqual({ ok: true, agentId: "main", sessionKey: first.sessionKey, blocked: "send_policy_deny" });
    // a denied session also ignores reset triggers
    const blockedNew = await inbound(sys, dm("sender", "/new"));
    expect(blockedNew).toMatchObject({ blocked: "send_policy_deny" });
    expect(blockedNew.runId).toBeUndefined();
    expect(await sys.svc.inbox.depth(first.sessionKey)).toBe(0);
    expect(await history(sys, first.sessionKey)).toEqual(before);
    expect((await entryOf(sys, first.sessionKey)).sessionId).toBe(first.sessionId);

    const inherit = await inbound(sys, dm("sender", "/send inherit"));
    expect(inherit).toMatchObject({ command: "send", sendPolicy: "inherit" });
    expect((await entryOf(sys, first.sessionKey)).sendPolicy).toBeUndefined();
    const again = await inbound(sys, dm("sender", "back again"));
    expect(again.blocked).toBeUndefined();
    expect((await waitRun(sys, again.runId)).reply).toBe("echo: back again");
    expect(await history(sys, first.sessionKey)).toHaveLength(4);
  });

  it("/send off on a stale session rolls it over first: the mute stays, a sweep does not lift it", async () => {
    const D = Date.UTC(2021, 7, 10);
    const a = await inbound(sys, dm("stale-owner", "one", { timestamp: D + 10 * HOUR }));
    await waitRun(sys, a.runId);
    // The next morning, past the 04:00 boundary: the session is stale when the owner mutes it.
    const off = await inbound(sys, dm("stale-owner", "/send off", { timestamp: D + DAY + 5 * HOUR }));
    expect(off).toMatchObject({ command: "send", sendPolicy: "deny" });
    expect(off.sessionId).not.toBe(a.sessionId);
    expect(await entryOf(sys, a.sessionKey)).toMatchObject({
      sessionId: off.sessionId,
      sendPolicy: "deny",
      resetReason: "daily",
    });
    // The sweep, later that day, has nothing to roll over (it used to, clearing the mute).
    await sweepOnce(sys.svc, D + DAY + 6 * HOUR);
    expect((await entryOf(sys, a.sessionKey)).sendPolicy).toBe("deny");
    const later = await inbound(sys, dm("stale-owner", "still there?", { timestamp: D + DAY + 6 * HOUR }));
    expect(later.blocked).toBe("send_policy_deny");
  });

  it("/send with a bad argument is a 400", async () => {
    const res = await sys.post("/v1/inbound", dm("sender2", "/send maybe"));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.message).toContain("/send on|off|inherit");
  });

  it("a config sendPolicy rule denies its channel + chatType only", async () => {
    const g = await inbound(sys, { channel: "quietchan", chatType: "group", from: "u1", groupId: "room", text: "hi" });
    expect(g).toEqual({
      ok: true,
      agentId: "main",
      sessionKey: "agent:main:quietchan:group:room",
      blocked: "send_policy_deny",
    });
    expect(await history(sys, "agent:main:quietchan:group:room")).toEqual([]);

    const d = await inbound(sys, { channel: "quietchan", chatType: "dm", from: "u1", text: "hi" });
    expect(d.blocked).toBeUndefined();
    expect((await waitRun(sys, d.runId)).status).toBe("ok");
    const other = await inbound(sys, {
      channel: "loudchan",
      chatType: "group",
      from: "u1",
      groupId: "room",
      text: "hi",
    });
    expect(other.blocked).toBeUndefined();
    await waitRun(sys, other.runId);

    // chatType "direct" in a rule is the same as dm
    const hushed = await inbound(sys, { channel: "hushchan", chatType: "dm", from: "u1", text: "hi" });
    expect(hushed.blocked).toBe("send_policy_deny");
    const hushGroup = await inbound(sys, {
      channel: "hushchan",
      chatType: "group",
      from: "u1",
      groupId: "r",
      text: "hi",
    });
    expect(hushGroup.blocked).toBeUndefined();
    await waitRun(sys, hushGroup.runId);

    // a session override beats the config rule
    const on = await inbound(sys, {
      channel: "quietchan",
      chatType: "group",
      from: "u1",
      groupId: "room",
      text: "/send on",
    });
    expect(on).toMatchObject({ command: "send", sendPolicy: "allow" });
    const allowed = await inbound(sys, {
      channel: "quietchan",
      chatType: "group",
      from: "u1",
      groupId: "room",
      text: "now?",
    });
    expect(allowed.blocked).toBeUndefined();
    expect((await waitRun(sys, allowed.runId)).reply).toBe("echo: now?");
  });

  it("a stale session.s allow override lets no message through a deny rule (the rollover clears it)", async () => {
    const D = Date.UTC(2021, 9, 10);
    const room = { channel: "quietchan", chatType: "group", from: "u1", groupId: "stale-room" };
    const on = await inbound(sys, { ...room, text: "/send on", timestamp: D + 10 * HOUR });
    expect(on).toMatchObject({ command: "send", sendPolicy: "allow" });
    const fresh = await inbound(sys, { ...room, text: "today", timestamp: D + 11 * HOUR });
    expect((await waitRun(sys, fresh.runId)).reply).toBe("echo: today");
    // The next day, after 04:00: the message would run in a rolled-over session without the override.
    const stale = await inbound(sys, { ...room, text: "tomorrow", timestamp: D + DAY + 5 * HOUR });
    expect(stale).toMatchObject({ blocked: "send_policy_deny" });
    expect(stale.runId).toBeUndefined();
    expect((await history(sys, on.sessionKey)).map((m: { content: unknown }) => m.content)).not.toContain("tomorrow");
  });

  it("/status answers with a status text", async () => {
    const first = await inbound(sys, dm("statuser", "hi"));
    await waitRun(sys, first.runId);
    const res = await inbound(sys, dm("statuser", "/status"));
    expect(res).toMatchObject({
      ok: true,
      command: "status",
      sessionKey: first.sessionKey,
      sessionId: first.sessionId,
    });
    expect(res.runId).toBeUndefined();
    expect(res.status).toContain("Switchboard status");
    expect(res.status).toContain(first.sessionKey);
    expect(res.status).toContain(first.sessionId);
    expect(res.status).toMatch(/Send policy: allow/);
    expect(await history(sys, first.sessionKey)).toHaveLength(2); // no turn for a command
  });
});

describe("/stop", () => {
  it("kills the running turn and drops queued follow-ups", async () => {
    const running = await inbound(sys, dm("stopper", "slow one"));
    await waitRunning(sys, running.runId, 10_000);
    const q1 = await inbound(sys, dm("stopper", "slow two"));
    const q2 = await inbound(sys, dm("stopper", "three"));
    expect((await sys.get(`/v1/runs/${q1.runId}`)).body.status).toBe("queued");

    const t0 = Date.now();
    const stop = await inbound(sys, dm("stopper", "/stop"));
    expect(stop).toMatchObject({ ok: true, command: "stop", stopped: 3, sessionId: running.sessionId });

    const killed = await waitRun(sys, running.runId);
    expect(killed.status).toBe("killed");
    expect(Date.now() - t0).toBeLessThan(2500); // aborted, not waited out (the script sleeps 4 s)
    for (const r of [q1, q2]) {
      const rec = (await sys.get(`/v1/runs/${r.runId}`)).body;
      expect(rec.status).toBe("killed");
    }
    expect(await sys.svc.inbox.depth(running.sessionKey)).toBe(0);
    expect((await entryOf(sys, running.sessionKey)).abortedLastRun).toBe(true);

    // the queued turns never ran: the transcript has only the killed turn
    const msgs = await history(sys, running.sessionKey);
    expect(msgs.filter((m) => m.role === "user").map(textOf)).toEqual(["slow one"]);

    // nothing left to stop; the session works again
    expect(await inbound(sys, dm("stopper", "/stop"))).toMatchObject({ command: "stop", stopped: 0 });
    const next = await inbound(sys, dm("stopper", "after"));
    expect(await waitRun(sys, next.runId)).toMatchObject({ status: "ok", reply: "echo: after" });
  });
});

describe("messageId de-dup", () => {
  it("the same messageId twice runs once", async () => {
    const body = dm("dedup", "only once", { messageId: "m-1" });
    const a = await inbound(sys, body);
    const b = await inbound(sys, body);
    expect(b).toMatchObject({ duplicate: true, runId: a.runId, sessionId: a.sessionId });
    expect(a.duplicate).toBeUndefined();
    await waitRun(sys, a.runId);
    expect(await sys.svc.inbox.depth(a.sessionKey)).toBe(0);
    expect((await history(sys, a.sessionKey)).filter((m) => m.role === "user")).toHaveLength(1);

    // another messageId is a new message
    const c = await inbound(sys, dm("dedup", "only once", { messageId: "m-2" }));
    expect(c.duplicate).toBeUndefined();
    expect(c.runId).not.toBe(a.runId);
    await waitRun(sys, c.runId);
    expect((await history(sys, a.sessionKey)).filter((m) => m.role === "user")).toHaveLength(2);
  });

  it("the same messageId from another chat is another message (ids are per chat on Telegram, Slack)", async () => {
    const alice = await inbound(sys, dm("dedup-alice", "from alice", { messageId: "1" }));
    const bob = await inbound(sys, dm("dedup-bob", "from bob", { messageId: "1" }));
    expect(bob.duplicate).toBeUndefined();
    expect(bob.runId).not.toBe(alice.runId);
    expect(bob.sessionKey).not.toBe(alice.sessionKey);
    expect(await waitRun(sys, bob.runId)).toMatchObject({ status: "ok" });
    expect((await history(sys, bob.sessionKey)).filter((m) => m.role === "user")).toHaveLength(1);
    // And in groups: the same id in two groups, both run; twice in one group, once.
    const group = (groupId: string) => ({
      ...dm("dedup-g", "in a group", { messageId: "7" }),
      chatType: "group",
      groupId,
    });
    const g1 = await inbound(sys, group("g-1"));
    const g2 = await inbound(sys, group("g-2"));
    expect(g2.duplicate).toBeUndefined();
    expect((await inbound(sys, group("g-1"))).duplicate).toBe(true);
    expect(new Set([g1.runId, g2.runId]).size).toBe(2);
  });
});

describe("messageId de-dup under concurrency", () => {
  it("the same messageId arriving concurrently (a channel retrying a slow webhook) runs once", async () => {
    const body = dm("dedup2", "burst", { messageId: "m-burst" });
    const results = await Promise.all(Array.from({ length: 8 }, () => inbound(sys, body)));
    const runIds = new Set(results.map((r) => r.runId));
    expect(runIds.size).toBe(1);
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    await waitRun(sys, results[0]!.runId);
    expect((await history(sys, results[0]!.sessionKey)).filter((m) => m.role === "user")).toHaveLength(1);
  });

  it("a message whose handling failed is not remembered as handled", async () => {
    const body = dm("dedup3", "/send sideways", { messageId: "m-bad" });
    expect((await sys.post("/v1/inbound", body)).status).toBe(400);
    expect((await sys.post("/v1/inbound", body)).status).toBe(400);
  });

  it("concurrent first messages to a new session create it once", async () => {
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => inbound(sys, dm("newcrowd", `n${i}`))));
    expect(new Set(results.map((r) => r.sessionId)).size).toBe(1);
    expect(results.filter((r) => r.isNewSession)).toHaveLength(1);
    await Promise.all(results.map((r) => waitRun(sys, r.runId)));
    expect((await history(sys, results[0]!.sessionKey)).filter((m) => m.role === "user")).toHaveLength(10);
  });
});

describe("validation", () => {
  const cases: [string, unknown, string][] = [
    ["missing text", { channel: "tg", chatType: "dm", from: "u" }, "text"],
    ["blank text", { channel: "tg", chatType: "dm", from: "u", text: "   " }, "text"],
    ["chatType x", { channel: "tg", chatType: "x", from: "u", text: "hi" }, "chatType"],
    ["group without groupId", { channel: "tg", chatType: "group", from: "u", text: "hi" }, "groupId"],
    ["missing from", { channel: "tg", chatType: "dm", text: "hi" }, "from"],
    ["bad channel", { channel: "Bad Channel!", chatType: "dm", from: "u", text: "hi" }, "channel"],
    ["negative timestamp", { channel: "tg", chatType: "dm", from: "u", text: "hi", timestamp: -5 }, "timestamp"],
    [
      "Telegram topic id too long for a transcript file name",
      { channel: "telegram", chatType: "group", groupId: "-100123", threadId: "话".repeat(30), from: "u", text: "hi" },
      "threadId",
    ],
    [
      "timestamp past the last valid date",
      { channel: "tg", chatType: "dm", from: "u", text: "hi", timestamp: 8_640_000_000_000_001 },
      "timestamp",
    ],
  ];
  for (const [name, body, path] of cases) {
    it(`${name} → 400 invalid_request with issue path ${path}`, async () => {
      const res = await sys.post("/v1/inbound", body);
      expect(res.status).toBe(400);
      expect(res.body.ok).toBe(false);
      expect(res.body.error.code).toBe("invalid_request");
      expect(typeof res.body.error.message).toBe("string");
      expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain(path);
      for (const i of res.body.error.issues) expect(typeof i.message).toBe("string");
    });
  }

  it("a timestamp in seconds (Telegram's date, Slack's ts) → 400 saying it must be milliseconds", async () => {
    const seconds = Math.floor(Date.now() / 1000);
    const res = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "dm",
      from: "secs",
      text: "hi",
      timestamp: seconds,
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    const issue = res.body.error.issues.find((i: { path: string }) => i.path === "timestamp");
    expect(issue?.message).toContain("milliseconds");
    expect(res.body.error.message).toContain("timestamp");
    // The same instant in milliseconds is accepted, in the session's first message: nothing was
    // created for the refused one.
    const ok = await inbound(sys, dm("secs", "hi", { timestamp: seconds * 1000 }));
    expect(ok.isNewSession).toBe(true);
    expect((await entryOf(sys, ok.sessionKey)).updatedAt).toBe(seconds * 1000);
    await waitRun(sys, ok.runId);
  });

  it("an unknown key → 400 naming the key", async () => {
    const res = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "u", text: "hi", groupID: "g" });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.issues.length).toBeGreaterThan(0);
    expect(JSON.stringify(res.body.error.issues)).toContain("groupID");
  });

  it("several problems are all reported", async () => {
    const res = await sys.post("/v1/inbound", { channel: "tg", chatType: "x", from: "" });
    expect(res.status).toBe(400);
    const paths = res.body.error.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(["chatType", "from", "text"]));
  });

  it("a non-JSON body → 400 invalid_request", async () => {
    const res = await httpJson("POST", `${sys.url}/v1/inbound`, "{not json", { "content-type": "application/json" });
    expect(res.status).toBe(400);
    expect(res.body.ok).toBe(false);
    expect(res.body.error.code).toBe("invalid_request");
    expect(Array.isArray(res.body.error.issues)).toBe(true);
  });

  it("a JSON array or empty body → 400 invalid_request", async () => {
    const arr = await sys.post("/v1/inbound", [1, 2]);
    expect(arr.status).toBe(400);
    expect(arr.body.error.code).toBe("invalid_request");
    const empty = await httpJson("POST", `${sys.url}/v1/inbound`, "", { "content-type": "application/json" });
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe("invalid_request");
  });
});

describe("recorded route", () => {
  it("origin, deliveryContext and lastChannel are recorded on the session", async () => {
    const res = await inbound(sys, {
      channel: "tg",
      accountId: "bot1",
      chatType: "group",
      from: "u42",
      to: "bot",
      groupId: "grp7",
      senderName: "Ursula",
      groupSubject: "Team room",
      text: "hi",
    });
    const entry = await entryOf(sys, res.sessionKey);
    expect(entry).toMatchObject({
      channel: "tg",
      chatType: "group",
      groupId: "grp7",
      subject: "Team room",
      displayName: "Team room",
      lastChannel: "tg",
      lastTo: "grp7",
      lastAccountId: "bot1",
      deliveryContext: { channel: "tg", to: "grp7", accountId: "bot1" },
      origin: { provider: "tg", chatType: "group", from: "u42", to: "bot", accountId: "bot1", label: "Team room" },
    });
    expect(entry.lastThreadId).toBeUndefined();

    const d = await inbound(sys, {
      channel: "tg",
      chatType: "dm",
      from: "u43",
      senderName: "Vic",
      threadId: 5,
      text: "hi",
    });
    const de = await entryOf(sys, d.sessionKey);
    expect(de).toMatchObject({
      lastChannel: "tg",
      lastTo: "u43",
      lastThreadId: "5",
      displayName: "Vic",
      deliveryContext: { channel: "tg", to: "u43", threadId: "5" },
    });
    // resolvable by sessionId too
    expect((await sys.rpc("sessions.resolve", { sessionId: d.sessionId })).key).toBe(d.sessionKey);
  });

  it("the route is the latest message's, whole: no bot account kept from an earlier one", async () => {
    const group = { channel: "tg", chatType: "group", from: "u50", groupId: "grp9", text: "hi" };
    const first = await inbound(sys, { ...group, accountId: "work" });
    expect((await entryOf(sys, first.sessionKey)).deliveryContext).toEqual({
      channel: "tg",
      to: "grp9",
      accountId: "work",
    });
    const second = await inbound(sys, group); // through the default account
    expect(second.sessionKey).toBe(first.sessionKey);
    const entry = await entryOf(sys, first.sessionKey);
    expect(entry.deliveryContext).toEqual({ channel: "tg", to: "grp9" });
    expect(entry.lastAccountId).toBeUndefined();
    // A session's first message without an account stores no empty fields either.
    const fresh = await inbound(sys, { ...group, groupId: "grp10" });
    expect((await entryOf(sys, fresh.sessionKey)).deliveryContext).toEqual({ channel: "tg", to: "grp10" });
  });
});

describe("concurrent rotation", () => {
  it("concurrent messages to a stale session from several clients rotate it exactly once", async () => {
    const peer = await startPeer(sys.config, { gateway: true, workers: false });
    extra.push(peer);
    const D = Date.UTC(2021, 8, 1);
    const first = await inbound(sys, dm("crowd", "start", { timestamp: D + 10 * HOUR }));
    await waitRun(sys, first.runId);

    const at = D + 2 * DAY + 12 * HOUR; // stale (daily)
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => inbound(i % 2 ? peer : sys, dm("crowd", `m${i}`, { timestamp: at + i }))),
    );
    const ids = new Set(results.map((r) => r.sessionId));
    expect(ids.size).toBe(1);
    const [newId] = [...ids];
    expect(newId).not.toBe(first.sessionId);
    expect(results.filter((r) => r.isNewSession)).toHaveLength(1);
    expect(results.find((r) => r.isNewSession)!.resetReason).toBe("daily");

    const entry = await entryOf(sys, first.sessionKey);
    expect(entry.sessionId).toBe(newId);
    expect(entry.previousSessionId).toBe(first.sessionId);
    await Promise.all(results.map((r) => waitRun(sys, r.runId)));
    const msgs = await history(sys, first.sessionKey);
    expect(msgs.filter((m) => m.role === "user")).toHaveLength(12);
    const archived = sessionFiles(sys).filter((f) => f.startsWith(`${first.sessionId}.jsonl.reset.`));
    expect(archived).toHaveLength(1);
  });
});
