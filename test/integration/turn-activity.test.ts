/**
 * Turns accepted without a chat message (the `agent` RPC, a `sessions_send` target) resolve
 * their session as OpenClaw's agent command does: a stale session rolls over first, and the turn
 * counts as activity (written at most once a minute per session). Before, such sessions never
 * reset and `session.maintenance` pruned them as idle while they were in daily use.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { runOk, tool } from "../helpers/api.js";
import { activityEveryMs, sessionForTurn, TURN_ACTIVITY_EVERY_MS } from "../../src/rotation/turn-session.js";
import { pruneOnce } from "../../src/workers/session-prune.js";

const MIN = 60_000;
let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({
    session: {
      reset: { mode: "idle", idleMinutes: 60 },
      maintenance: { mode: "enforce", pruneAfter: "1d" },
    },
    tools: { sessions: { visibility: "all" } },
    agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok: {{text}}" }] } }] },
  });
});
afterAll(async () => {
  await sys?.close();
});

const dir = () => join(sys.config.storage.dir, "agents", "main", "sessions");

/** A session last active `agoMs` ago, with one line in its transcript. */
async function sessionActiveAgo(key: string, agoMs: number) {
  const entry = await sys.svc.sessions.upsert(
    key,
    { agentId: "main", kind: "other" },
    { sessionId: randomUUID() },
    { now: Date.now() - agoMs },
  );
  await sys.svc.transcripts.append("main", entry.sessionId, [
    { type: "message", id: "old", timestamp: new Date().toISOString(), message: { role: "user", content: "old" } },
  ]);
  return entry;
}

describe("a turn from the agent RPC", () => {
  it("rolls a stale session over first (reason idle) and the old transcript is archived", async () => {
    const old = await sessionActiveAgo("agent:main:rpc-stale", 2 * 60 * MIN);
    const r = await sys.rpc("agent", { sessionKey: "agent:main:rpc-stale", message: "after a long pause" });
    expect(r.sessionId).not.toBe(old.sessionId);
    await runOk(sys, r.runId, 10_000);
    const entry = await sys.svc.sessions.get("agent:main:rpc-stale");
    expect(entry).toMatchObject({ sessionId: r.sessionId, previousSessionId: old.sessionId, resetReason: "idle" });
    await settle(() => readdirSync(dir()).some((f) => f.startsWith(`${old.sessionId}.jsonl.reset.`)), {
      what: "the stale transcript archived",
    });
    expect(existsSync(join(dir(), `${r.sessionId}.jsonl`))).toBe(true);
  });

  it("counts as activity, written at most once a minute: the session is not pruned as idle", async () => {
    const key = "agent:main:rpc-active";
    const old = await sessionActiveAgo(key, 50 * MIN);
    const t0 = Date.now();
    const first = await sys.rpc("agent", { sessionKey: key, message: "one" });
    expect(first.sessionId).toBe(old.sessionId);
    const touched = (await sys.svc.sessions.get(key))!;
    expect(touched.updatedAt).toBeGreaterThanOrEqual(t0);
    const staleAt = await sys.svc.redis.zscore(sys.svc.keys.staleIndex(), key);
    expect(Number(staleAt)).toBeGreaterThan(t0 + 59 * MIN);
    await runOk(sys, first.runId, 10_000);
    const second = await sys.rpc("agent", { sessionKey: key, message: "two" });
    await runOk(sys, second.runId, 10_000);
    expect((await sys.svc.sessions.get(key))!.updatedAt).toBe(touched.updatedAt);
    expect(TURN_ACTIVITY_EVERY_MS).toBe(MIN);
    // Over a day after it was created, under a day after its last turn: not idle, not pruned.
    const report = await pruneOnce(sys.svc, { now: t0 + 24 * 60 * MIN - 10 * MIN });
    expect(old.createdAt + 24 * 60 * MIN).toBeLessThan(t0 + 24 * 60 * MIN - 10 * MIN);
    expect(report.pruned).not.toContain(key);
  });

  it("a sessions_send target that went stale rolls over before the message runs", async () => {
    const old = await sessionActiveAgo("agent:main:send-target", 2 * 60 * MIN);
    await sys.svc.sessions.upsert("agent:main:main", { agentId: "main", kind: "main" }, { sessionId: randomUUID() });
    const res = await tool(sys, "sessions_send", "agent:main:main", {
      sessionKey: "agent:main:send-target",
      message: "wake up",
      timeoutSeconds: 10,
    });
    expect(res.details?.status ?? res.status).toBe("ok");
    const entry = await sys.svc.sessions.get("agent:main:send-target");
    expect(entry?.sessionId).not.toBe(old.sessionId);
    expect(entry?.resetReason).toBe("idle");
  });
});

describe("a short idle window (idleMinutes: 1)", () => {
  let short: TestSystem;
  beforeAll(async () => {
    short = await startTestSystem({
      session: { reset: { mode: "idle", idleMinutes: 1 } },
      agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok" }] } }] },
    });
  });
  afterAll(async () => {
    await short?.close();
  });

  it("a turn every 10 s for 90 s: never reset as idle; after a minute of silence it is", async () => {
    const t0 = Date.now();
    let entry = await short.svc.sessions.upsert(
      "agent:main:busy",
      { agentId: "main", kind: "other" },
      { sessionId: randomUUID() },
      { now: t0 },
    );
    const first = entry.sessionId;
    // The activity lag allowed is a tenth of the window (6 s), not a flat minute.
    expect(activityEveryMs(entry, t0 + MIN)).toBe(6_000);
    for (let s = 10; s <= 90; s += 10) {
      entry = await sessionForTurn(short.svc, entry, t0 + s * 1000);
      expect(entry.sessionId, `turn at ${s} s`).toBe(first);
    }
    const after = await sessionForTurn(short.svc, entry, t0 + 90_000 + MIN + 1000);
    expect(after.sessionId).not.toBe(first);
    expect(after.resetReason).toBe("idle");
  });
});
