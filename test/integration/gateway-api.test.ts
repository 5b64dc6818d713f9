/**
 * The HTTP gateway (README "HTTP API") with a token configured: auth on every endpoint but the
 * probes, Basic auth for Bull Board, metrics, run records, and the RPC methods with their
 * error answers. Real Redis, gateway + workers in this process.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpJson, startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

const TOKEN = "gw-test-token-0123456789";
const AUTH = { authorization: `Bearer ${TOKEN}` };

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { auth: { token: TOKEN } },
    maintenance: { sweepEveryMs: 3_600_000 },
    session: { dmScope: "per-channel-peer" },
  });
});

afterAll(async () => {
  await sys?.close();
});

/** The raw RPC answer: `{ status, body }` (the harness's `rpc` throws on ok:false). */
async function rpcRaw(method: string, params: unknown = {}) {
  return await httpJson("POST", `${sys.url}/v1/rpc/${method}`, params, AUTH);
}

function sessionsDir(): string {
  return join(sys.config.storage.dir, "agents", "main", "sessions");
}

function files(): string[] {
  try {
    return readdirSync(sessionsDir());
  } catch {
    return [];
  }
}

async function runAgent(sessionKey: string, message: string) {
  const r = await sys.rpc("agent", { sessionKey, message });
  const done = await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 });
  expect(done.status).toBe("ok");
  return r;
}

describe("auth", () => {
  it("401 without a token or with a wrong one, 200 with the right bearer token", async () => {
    for (const [method, path, body] of [
      ["GET", "/v1/deliveries", undefined],
      ["GET", "/metrics", undefined],
      ["GET", "/v1/runs/whatever", undefined],
      ["POST", "/v1/rpc/sessions.list", {}],
      ["POST", "/v1/inbound", { channel: "tg", chatType: "dm", from: "x", text: "hi" }],
      ["POST", "/v1/tools/sessions_list", { sessionKey: "main", args: {} }],
    ] as const) {
      const none = await httpJson(method, sys.url + path, body);
      expect(none.status, `${method} ${path}`).toBe(401);
      expect(none.body).toMatchObject({ ok: false, error: { code: "unauthorized" } });
      const wrong = await httpJson(method, sys.url + path, body, { authorization: `Bearer ${TOKEN}x` });
      expect(wrong.status, `${method} ${path} wrong token`).toBe(401);
      const shorter = await httpJson(method, sys.url + path, body, { authorization: `Bearer ${TOKEN.slice(0, -1)}` });
      expect(shorter.status).toBe(401);
      const scheme = await httpJson(method, sys.url + path, body, { authorization: TOKEN });
      expect(scheme.status).toBe(401);
    }
    const ok = await httpJson("POST", `${sys.url}/v1/rpc/sessions.list`, {}, AUTH);
    expect(ok.status).toBe(200);
    expect(ok.body.ok).toBe(true);
    // the inbound that was refused left nothing behind
    expect(ok.body.result.sessions.map((s: { key: string }) => s.key)).not.toContain("agent:main:tg:dm:x");
    expect((await httpJson("GET", `${sys.url}/v1/deliveries`, undefined, AUTH)).status).toBe(200);
  });

  it("/healthz and /readyz are open", async () => {
    const h = await httpJson("GET", `${sys.url}/healthz`);
    expect(h).toEqual({ status: 200, body: { ok: true } });
    const r = await httpJson("GET", `${sys.url}/readyz`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, redis: "up" });
    // a query string does not change what is open
    expect((await httpJson("GET", `${sys.url}/healthz?x=1`)).status).toBe(200);
    expect((await httpJson("GET", `${sys.url}/metrics?healthz`)).status).toBe(401);
  });

  it("Bull Board takes Basic auth with the token as password, and prompts without it", async () => {
    const none = await fetch(`${sys.url}/admin/queues`);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Basic /);
    await none.text();
    const wrong = await fetch(`${sys.url}/admin/queues`, {
      headers: { authorization: `Basic ${Buffer.from("admin:nope-nope-nope").toString("base64")}` },
    });
    expect(wrong.status).toBe(401);
    await wrong.text();
    const basic = await fetch(`${sys.url}/admin/queues`, {
      headers: { authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString("base64")}` },
    });
    expect(basic.status).toBe(200);
    expect(await basic.text()).toMatch(/<html/i);
    const api = await fetch(`${sys.url}/admin/queues/api/queues`, { headers: AUTH });
    expect(api.status).toBe(200);
    const names = ((await api.json()) as { queues: { name: string }[] }).queues.map((q) => q.name);
    expect(names).toEqual(expect.arrayContaining(["runs", "delivery", "maintenance"]));
  });
});

describe("probes, metrics and run records", () => {
  it("/metrics exposes BullMQ job counts and the switchboard gauges", async () => {
    await runAgent("agent:main:metrics", "count me");
    const res = await httpJson("GET", `${sys.url}/metrics`, undefined, AUTH);
    expect(res.status).toBe(200);
    const text = String(res.body);
    expect(text).toMatch(/bullmq_job_count\{[^}]*queue="runs"[^}]*\} \d+/);
    const sessions = /switchboard_sessions\{[^}]*\} (\d+)/.exec(text);
    expect(Number(sessions?.[1])).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/switchboard_run_workers\{[^}]*\} [1-9]/);
  });

  it("GET /v1/runs/:id returns the record, 404 for an unknown run", async () => {
    const r = await runAgent("agent:main:runrec", "hello");
    const rec = await httpJson("GET", `${sys.url}/v1/runs/${r.runId}`, undefined, AUTH);
    expect(rec.status).toBe(200);
    expect(rec.body).toMatchObject({
      runId: r.runId,
      sessionKey: "agent:main:runrec",
      status: "ok",
      reply: "echo: hello",
    });
    expect(rec.body.startedAt).toBeLessThanOrEqual(rec.body.endedAt);
    const missing = await httpJson("GET", `${sys.url}/v1/runs/00000000-0000-4000-8000-000000000000`, undefined, AUTH);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ ok: false, error: { code: "run_not_found" } });
  });

  it("an unknown RPC method is a 404", async () => {
    const res = await rpcRaw("sessions.explode", {});
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(res.body.error.message).toContain("sessions.explode");
  });

  it("an unknown route, a malformed URL and an over-long parameter answer in the one error shape", async () => {
    const nope = await sys.get("/nope");
    expect(nope.status).toBe(404);
    expect(nope.body).toMatchObject({ ok: false, error: { code: "not_found" } });
    const badUrl = await sys.get("/v1/runs/%ED%A0%80");
    expect(badUrl.status).toBe(400);
    expect(badUrl.body).toMatchObject({ ok: false, error: { code: "invalid_request" } });
    const long = await sys.get(`/v1/runs/${"r".repeat(3000)}`);
    expect(long.status).toBeGreaterThanOrEqual(400);
    expect(long.status).toBeLessThan(500);
    expect(long.body).toMatchObject({ ok: false, error: { code: expect.any(String) } });
  });

  it("invalid RPC params are a 400 with issues", async () => {
    const res = await rpcRaw("chat.history", { sessionKey: "main", limit: 0, bogus: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain("limit");
    const wait = await rpcRaw("agent.wait", {});
    expect(wait.status).toBe(400);
    expect(wait.body.error.issues.map((i: { path: string }) => i.path)).toContain("runId");
  });
});

describe("sessions.* RPC", () => {
  it("sessions.resolve by key, sessionId and label; a miss is ok:false", async () => {
    const r = await runAgent("agent:main:resolve-me", "x");
    await sys.rpc("sessions.patch", { key: "agent:main:resolve-me", label: "resolver" });

    const byKey = await sys.rpc("sessions.resolve", { key: "agent:main:resolve-me" });
    expect(byKey).toMatchObject({ key: "agent:main:resolve-me", entry: { sessionId: r.sessionId, label: "resolver" } });
    const byId = await sys.rpc("sessions.resolve", { sessionId: r.sessionId });
    expect(byId.key).toBe("agent:main:resolve-me");
    const byLabel = await sys.rpc("sessions.resolve", { label: "resolver" });
    expect(byLabel.key).toBe("agent:main:resolve-me");
    // key aliases are canonicalised
    const upper = await sys.rpc("sessions.resolve", { key: "AGENT:MAIN:RESOLVE-ME" });
    expect(upper.key).toBe("agent:main:resolve-me");

    for (const [params, message] of [
      [{ key: "agent:main:nobody" }, "No session found: agent:main:nobody"],
      [{ sessionId: "5b0e7b4e-0000-4000-8000-000000000000" }, "No session found: 5b0e7b4e-0000-4000-8000-000000000000"],
      // OpenClaw's text for a label (as the sessions_send tool says it).
      [{ label: "no-such-label" }, "No session found with label: no-such-label"],
    ] as const) {
      const miss = await rpcRaw("sessions.resolve", params);
      expect(miss.status).toBe(200);
      expect(miss.body).toEqual({ ok: false, error: { code: "session_not_found", message } });
    }
    const both = await rpcRaw("sessions.resolve", { key: "main", label: "resolver" });
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe("invalid_request");
    const none = await rpcRaw("sessions.resolve", {});
    expect(none.status).toBe(400);
  });

  it("sessions.patch: unique labels, sendPolicy validation and normalisation", async () => {
    await runAgent("agent:main:patch-a", "a");
    await runAgent("agent:main:patch-b", "b");
    const a = await sys.rpc("sessions.patch", { key: "agent:main:patch-a", label: "shared" });
    expect(a.entry.label).toBe("shared");

    const conflict = await rpcRaw("sessions.patch", { key: "agent:main:patch-b", label: "shared" });
    expect(conflict.status).toBe(200);
    expect(conflict.body).toMatchObject({ ok: false, error: { code: "label_conflict" } });
    expect((await sys.rpc("sessions.resolve", { key: "agent:main:patch-b" })).entry.label).toBeUndefined();
    // the same session may re-set its own label; freeing it lets another take it
    await sys.rpc("sessions.patch", { key: "agent:main:patch-a", label: "shared" });
    await sys.rpc("sessions.patch", { key: "agent:main:patch-a", label: null });
    const b = await sys.rpc("sessions.patch", { key: "agent:main:patch-b", label: "shared" });
    expect(b.entry.label).toBe("shared");
    expect((await sys.rpc("sessions.resolve", { label: "shared" })).key).toBe("agent:main:patch-b");

    const bad = await rpcRaw("sessions.patch", { key: "agent:main:patch-a", sendPolicy: "maybe" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect(bad.body.error.issues).toEqual(
      expect.arrayContaining([{ path: "sendPolicy", message: 'invalid sendPolicy (use "allow"|"deny")' }]),
    );

    const upper = await sys.rpc("sessions.patch", { key: "agent:main:patch-a", sendPolicy: "DENY" });
    expect(upper.entry.sendPolicy).toBe("deny");
    const cleared = await sys.rpc("sessions.patch", { key: "agent:main:patch-a", sendPolicy: null });
    expect(cleared.entry.sendPolicy).toBeUndefined();

    const missing = await rpcRaw("sessions.patch", { key: "agent:main:patch-nobody", label: "x" });
    expect(missing.body).toMatchObject({ ok: false, error: { code: "session_not_found" } });
    const unknownField = await rpcRaw("sessions.patch", { key: "agent:main:patch-a", sessionId: "x" });
    expect(unknownField.status).toBe(400);
  });

  it("sessions.reset: new sessionId, label and sendPolicy kept; maintenance archives the old transcript", async () => {
    const key = "agent:main:reset-me";
    const r = await runAgent(key, "before reset");
    await sys.rpc("sessions.patch", { key, label: "resettable", sendPolicy: "allow" });
    expect(files()).toContain(`${r.sessionId}.jsonl`);

    const reset = await sys.rpc("sessions.reset", { key });
    expect(reset.key).toBe(key);
    expect(reset.previousSessionId).toBe(r.sessionId);
    expect(reset.sessionId).not.toBe(r.sessionId);
    expect(reset.entry).toMatchObject({
      sessionId: reset.sessionId,
      label: "resettable",
      sendPolicy: "allow",
      resetReason: "reset",
    });

    await settle(() => files().some((f) => f.startsWith(`${r.sessionId}.jsonl.reset.`)), {
      what: "the old transcript archived as .reset",
      timeoutMs: 10_000,
    });
    expect(files()).not.toContain(`${r.sessionId}.jsonl`);

    const hist = await sys.rpc("chat.history", { sessionKey: key });
    expect(hist.sessionId).toBe(reset.sessionId);
    expect(hist.messages).toEqual([]);
    // the new session works
    const after = await runAgent(key, "after reset");
    expect(after.sessionId).toBe(reset.sessionId);
    expect((await sys.rpc("chat.history", { sessionKey: key })).messages).toHaveLength(2);

    const reason = await sys.rpc("sessions.reset", { key, reason: "new" });
    expect(reason.entry.resetReason).toBe("new");
    const missing = await rpcRaw("sessions.reset", { key: "agent:main:reset-nobody" });
    expect(missing.body).toMatchObject({ ok: false, error: { code: "session_not_found" } });
  });

  it("sessions.delete refuses the main session and deletes others (transcript archived as .deleted.)", async () => {
    await runAgent("main", "main lives");
    const refuse = await rpcRaw("sessions.delete", { key: "main" });
    expect(refuse.body.ok).toBe(false);
    expect(refuse.body.error.message).toMatch(/main/);
    const refuse2 = await rpcRaw("sessions.delete", { key: "agent:main:main" });
    expect(refuse2.body.ok).toBe(false);
    expect((await sys.rpc("sessions.resolve", { key: "main" })).key).toBe("agent:main:main");

    const key = "agent:main:delete-me";
    const r = await runAgent(key, "doomed");
    await sys.rpc("sessions.patch", { key, label: "doomed" });
    const del = await sys.rpc("sessions.delete", { key });
    expect(del).toMatchObject({ key, deleted: true });
    expect((await rpcRaw("sessions.resolve", { key })).body.ok).toBe(false);
    expect((await rpcRaw("sessions.resolve", { sessionId: r.sessionId })).body.ok).toBe(false);
    expect((await rpcRaw("sessions.resolve", { label: "doomed" })).body.ok).toBe(false);
    const listed = await sys.rpc("sessions.list", {});
    expect(listed.sessions.map((s: { key: string }) => s.key)).not.toContain(key);
    await settle(() => files().some((f) => f.startsWith(`${r.sessionId}.jsonl.deleted.`)), {
      what: "the deleted session's transcript archived as .deleted",
      timeoutMs: 10_000,
    });

    const again = await rpcRaw("sessions.delete", { key });
    expect(again.body).toMatchObject({ ok: false, error: { code: "session_not_found" } });
  });

  it("sessions.list lists newest first", async () => {
    await runAgent("agent:main:list-old", "1");
    await runAgent("agent:main:list-new", "2");
    const list = await sys.rpc("sessions.list", { limit: 500 });
    const keys: string[] = list.sessions.map((s: { key: string }) => s.key);
    expect(keys.indexOf("agent:main:list-new")).toBeGreaterThanOrEqual(0);
    expect(keys.indexOf("agent:main:list-new")).toBeLessThan(keys.indexOf("agent:main:list-old"));
    const times = list.sessions.map((s: { updatedAt: number }) => s.updatedAt);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(list.count).toBe(list.sessions.length);
  });
});

describe("chat.history, agent, agent.wait", () => {
  it("chat.history returns the last `limit` messages, oldest first", async () => {
    const key = "agent:main:history";
    for (const m of ["one", "two", "three"]) await runAgent(key, m);
    const all = await sys.rpc("chat.history", { sessionKey: key });
    expect(all.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
    const last2 = await sys.rpc("chat.history", { sessionKey: key, limit: 2 });
    expect(last2.messages).toHaveLength(2);
    expect(last2.messages[0]).toMatchObject({ role: "user", content: "three" });
    expect(last2.messages[1].role).toBe("assistant");
    expect(JSON.stringify(last2.messages[1].content)).toContain("echo: three");
    const last3 = await sys.rpc("chat.history", { sessionKey: key, limit: 3 });
    expect(last3.messages[0].role).toBe("assistant");
    expect(JSON.stringify(last3.messages[0].content)).toContain("echo: two");
    expect((await sys.rpc("chat.history", { sessionKey: "agent:main:never" })).messages).toEqual([]);
  });

  it("agent with the same idempotencyKey twice starts one run", async () => {
    const key = "agent:main:idem";
    const a = await sys.rpc("agent", { sessionKey: key, message: "once", idempotencyKey: "k-1" });
    const b = await sys.rpc("agent", { sessionKey: key, message: "once", idempotencyKey: "k-1" });
    expect(b.runId).toBe(a.runId);
    expect(b.duplicate).toBe(true);
    await sys.rpc("agent.wait", { runId: a.runId, timeoutMs: 10_000 });
    const c = await sys.rpc("agent", { sessionKey: key, message: "once", idempotencyKey: "k-2" });
    expect(c.runId).not.toBe(a.runId);
    await sys.rpc("agent.wait", { runId: c.runId, timeoutMs: 10_000 });
    const hist = await sys.rpc("chat.history", { sessionKey: key });
    expect(hist.messages.filter((m: { role: string }) => m.role === "user")).toHaveLength(2);
  });

  it("agent with the same idempotencyKey concurrently starts one run", async () => {
    const key = "agent:main:idem-burst";
    const results = await Promise.all(
      Array.from({ length: 20 }, () => sys.rpc("agent", { sessionKey: key, message: "burst", idempotencyKey: "k-b" })),
    );
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    await sys.rpc("agent.wait", { runId: results[0].runId, timeoutMs: 10_000 });
    await settle(async () => (await sys.svc.inbox.depth(key)) === 0 && !(await sys.svc.inbox.hasInflight(key)), {
      what: "the session's inbox and in-flight slot empty",
      timeoutMs: 5000,
    });
    const hist = await sys.rpc("chat.history", { sessionKey: key });
    expect(hist.messages.filter((m: { role: string }) => m.role === "user")).toHaveLength(1);
    expect(hist.messages.filter((m: { role: string }) => m.role === "assistant")).toHaveLength(1);
  });

  it("agent on a denied session is refused", async () => {
    const key = "agent:main:denied";
    await runAgent(key, "allowed first");
    await sys.rpc("sessions.patch", { key, sendPolicy: "deny" });
    const res = await rpcRaw("agent", { sessionKey: key, message: "blocked?" });
    expect(res.body.ok).toBe(false);
    expect(res.body.error.message).toBe("send blocked by session policy");
    expect(await sys.svc.inbox.depth(key)).toBe(0);
    expect((await sys.rpc("chat.history", { sessionKey: key })).messages).toHaveLength(2);
  });

  it("agent.wait on an unknown run is ok:false, and a short wait on a running run says timeout", async () => {
    const unknown = await rpcRaw("agent.wait", { runId: "no-such-run", timeoutMs: 50 });
    expect(unknown.body).toMatchObject({ ok: false, error: { code: "run_not_found" } });
    const r = await sys.rpc("agent", { sessionKey: "agent:main:waiter", message: "hi" });
    const done = await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 });
    expect(done).toMatchObject({ runId: r.runId, status: "ok", reply: "echo: hi" });
    // a late caller still gets the result
    const late = await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 0 });
    expect(late).toMatchObject({ status: "ok", reply: "echo: hi" });
  });
});
