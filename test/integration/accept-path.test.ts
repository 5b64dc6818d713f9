/**
 * The `agent` RPC's accept path: a gateway keeps the session entries it used, and its push is
 * conditional on the cached entry still being the stored one (turn-push.lua). These tests change
 * the entry through another gateway, behind the first one's cache, and check that every turn is
 * still decided on the current entry: the new transcript after a reset, a send policy turned to
 * deny, a session deleted and created again. And that a cached session costs one round trip.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryCache } from "../../src/runs/entry-cache.js";

let a: TestSystem;
let b: TestSystem;

beforeAll(async () => {
  a = await startTestSystem();
  b = await startPeer(a.config, { gateway: true, workers: false });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

async function agent(sys: TestSystem, sessionKey: string, message: string) {
  const { runId, sessionId } = await sys.rpc("agent", { sessionKey, message });
  const waited = await sys.rpc("agent.wait", { runId, timeoutMs: 10_000 });
  return { runId, sessionId, waited, record: await a.svc.runs.get(runId) };
}

describe("agent RPC with a cached session entry", () => {
  it("a reset made through another gateway: the next turn goes to the new transcript", async () => {
    const key = "agent:main:cache-reset";
    const first = await agent(a, key, "one");
    expect(first.waited).toMatchObject({ status: "ok" });
    await agent(a, key, "two"); // read and cached on this call (the first one created the session)
    expect(entryCache(a.svc).get(key)).toBeDefined();
    const reset = await b.rpc("sessions.reset", { key });
    expect(reset.entry.sessionId).not.toBe(first.sessionId);
    const third = await agent(a, key, "three");
    expect(third.sessionId).toBe(reset.entry.sessionId);
    expect(third.record).toMatchObject({ sessionId: reset.entry.sessionId, status: "ok" });
    const history = await a.rpc("chat.history", { sessionKey: key });
    expect(history.sessionId).toBe(reset.entry.sessionId);
    expect(
      history.messages.filter((m: { role: string }) => m.role === "user").map((m: { content: unknown }) => m.content),
    ).toEqual(["three"]);
  });

  it("a send policy set to deny through another gateway refuses the next turn", async () => {
    const key = "agent:main:cache-policy";
    await agent(a, key, "one");
    await agent(a, key, "two");
    await b.rpc("sessions.patch", { key, sendPolicy: "deny" });
    const r = await a.post("/v1/rpc/agent", { sessionKey: key, message: "blocked" });
    expect(r.body.ok).toBe(false);
    expect(JSON.stringify(r.body)).toMatch(/send|deny|block/i);
  });

  it("a session deleted and created again through another gateway: the turn uses the new one", async () => {
    const key = "agent:main:cache-delete";
    const first = await agent(a, key, "one");
    await agent(a, key, "two");
    await b.rpc("sessions.delete", { key });
    const again = await agent(b, key, "created on b");
    expect(again.sessionId).not.toBe(first.sessionId);
    const next = await agent(a, key, "on a");
    expect(next.sessionId).toBe(again.sessionId);
    expect(next.record).toMatchObject({ sessionId: again.sessionId, status: "ok" });
  });

  it("a cached session is accepted in one round trip when it has turns queued (no read before the push)", async () => {
    const key = "agent:main:cache-one-trip";
    await agent(a, key, "one");
    await agent(a, key, "two");
    await agent(a, key, "three");
    // Keep a turn in front (a waiting run keeps the session busy): later pushes are `queued`.
    const redis = a.svc.redis as unknown as { sendCommand: (cmd: { name: string }, ...rest: unknown[]) => unknown };
    const sent: string[] = [];
    let runId = "";
    const orig = redis.sendCommand;
    await a.svc.redis.rpush(a.svc.keys.inflight(key), '{"runId":"placeholder","sessionKey":"x"}');
    try {
      redis.sendCommand = function (this: unknown, cmd: { name: string }, ...rest: unknown[]) {
        sent.push(cmd.name);
        return orig.call(this, cmd, ...rest);
      };
      runId = (await a.rpc("agent", { sessionKey: key, message: "queued" })).runId;
    } finally {
      redis.sendCommand = orig;
      await a.svc.redis.del(a.svc.keys.inflight(key), a.svc.keys.inbox(key));
    }
    expect(sent).toEqual(["evalsha"]);
    // That one command queued the turn: its run record exists, queued behind the placeholder.
    expect(await a.svc.runs.get(runId)).toMatchObject({ runId, sessionKey: key, status: "queued" });
  });
});
