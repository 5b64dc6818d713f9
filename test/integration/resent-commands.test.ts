/**
 * Scripts whose answer is lost with their connection: ioredis sends an unanswered command again
 * after it reconnects, so the script runs twice. A TCP proxy in front of the test Redis holds back
 * the answer to one command and then drops that connection.
 * - The `agent` RPC's push: the turn is queued once, and the call, which had no idempotency key,
 *   is not told it was a duplicate (it was: the second run found the runId it had just created).
 * - A drain's lease take (lease-begin.lua, lease-acquire.lua): the second run answers with the
 *   lease and the turn the first one took. It used to find the lease held, by nobody now, so the
 *   session waited out the lease TTL (30 s) and the turn ran as a second attempt. Tested end to
 *   end and on the scripts themselves, run twice with one nonce as a resent command runs.
 * - A finish (run-finish.lua, which may release the lease): the turn is finished once and the
 *   session goes on at once.
 * - A transcript lock acquire (txlock-acquire.lua): the second run finds the lock held under its
 *   own token and answers acquired. It used to queue behind its own lock until the lock TTL.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { expectTranscript, scriptConfig, timedWait } from "../fixtures/runs-support.js";
import { Inbox } from "../../src/runs/inbox.js";
import { RunRecords } from "../../src/runs/run-records.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { newRedis, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { SessionLeases } from "../../src/runs/session-lease.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { luaCommand } from "../../src/storage/lua-script.js";
import { TranscriptLock } from "../../src/transcript/transcript-lock.js";
import { createRedis } from "../../src/queues/redis-connections.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { settle } from "../helpers/settle.js";

let proxy: TcpProxy;
/** A gateway without workers: the turns stay in the inbox, where they can be counted. */
let sys: TestSystem;
/** Gateway and workers in one process, through the proxy too (they share connections). */
let worked: TestSystem;
let admin: Redis;

beforeAll(async () => {
  proxy = await startTcpProxy(testRedisUrl());
  const config = () =>
    scriptConfig(
      [{ when: { contains: "counted" }, usage: { input: 10, output: 5 }, reply: "counted" }, { reply: "re: {{text}}" }],
      { redis: { url: proxy.url } },
    );
  sys = await startTestSystem(config(), { gateway: true, workers: false });
  worked = await startTestSystem(config(), { gateway: true, workers: {} });
  admin = newRedis();
});

afterAll(async () => {
  admin?.disconnect();
  await sys?.close();
  await worked?.close();
  await proxy?.close();
});

/** The texts queued in a session's inbox, in order. */
async function inboxTexts(sessionKey: string): Promise<string[]> {
  const raw = await admin.lrange(sys.svc.keys.inbox(sessionKey), 0, -1);
  return raw.map((t) => (JSON.parse(t) as { text: string }).text);
}

/**
 * `call()` while the answer to the first command a client then sends that `matches` is held back
 * and its connection dropped. `call` is awaited only after the drop: a gateway and its workers
 * share connections, so the held connection may also hold the answer `call` itself waits for.
 */
async function withLostAnswer<T>(matches: (sent: string) => boolean, call: () => Promise<T>): Promise<T> {
  const held = proxy.holdRepliesWhen(matches);
  const pending = call();
  (await held)();
  return await pending;
}

/** The `agent` RPC on the gateway without workers, the answer to its push lost once. */
async function agentWithLostPushAnswer(params: Record<string, unknown>): Promise<any> {
  const inbox = sys.svc.keys.inbox(`agent:main:${params.sessionKey as string}`);
  const res = await withLostAnswer(
    (sent) => sent.includes(inbox),
    () => sys.post("/v1/rpc/agent", params),
  );
  expect(res.status).toBe(200);
  return res.body;
}

describe("a push sent again after its answer was lost", () => {
  it("queues the turn once and answers as for any first call", async () => {
    const first = await sys.rpc("agent", { sessionKey: "resent", message: "one" });
    expect(first.duplicate).toBeUndefined();

    const body = await agentWithLostPushAnswer({ sessionKey: "resent", message: "two" });
    expect(body.ok).toBe(true);
    expect(body.result.duplicate).toBeUndefined();
    expect(await inboxTexts("agent:main:resent")).toEqual(["one", "two"]);
    expect(await sys.svc.runs.get(body.result.runId)).toMatchObject({ status: "queued" });
  });

  it("with an idempotency key a real retry is still told it is a duplicate, and nothing is queued twice", async () => {
    const params = { sessionKey: "resent-idem", message: "once", idempotencyKey: "k-1" };
    const body = await agentWithLostPushAnswer(params);
    // The resent push cannot be told from a retry here: the runId comes from the key.
    expect(body.ok).toBe(true);
    const retry = await sys.rpc("agent", params);
    expect(retry).toMatchObject({ runId: body.result.runId, duplicate: true });
    expect(await inboxTexts("agent:main:resent-idem")).toEqual(["once"]);
  });
});

describe("a lease take run twice (its answer lost, the command sent again)", () => {
  it("lease-begin: the same take twice answers with the same token and the turn it began, counted once", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const session = "agent:main:taken";
    const records = new RunRecords(admin, keys);
    const inbox = new Inbox(admin, keys, records);
    const turn = await enqueueTurn(
      { inbox, queues: sys.svc.queues, config: sys.config },
      { sessionKey: session, agentId: "main", sessionId: "s-1", text: "hi", step: "turn", provenance: "user" },
    );
    const begin = luaCommand(admin, new URL("../../src/runs/lua/", import.meta.url), "lease-begin");
    const k = [
      keys.lease(session),
      keys.fence(session),
      keys.inbox(session),
      keys.inflight(session),
      keys.session(session),
      keys.pendingWakes(),
      keys.leaseTake(session),
      keys.inboxBytes(session),
    ];
    const args = (nonce: string) => [30_000, keys.run(""), Date.now(), `|${session}`, "", nonce];
    const first = (await begin(k, args("nonce-1"))) as [number, [string, string[], string | null]];
    const again = (await begin(k, args("nonce-1"))) as [number, [string, string[], string | null]];
    expect(first[0]).toBe(1);
    expect(again[0]).toBe(1);
    expect(JSON.parse(again[1][0]).runId).toBe(turn.runId);
    expect(again[1]).toEqual(first[1]);
    expect(await records.get(turn.runId)).toMatchObject({ status: "running", attempts: 1 });
    // Another take while the lease is held gets nothing.
    const other = (await begin(k, args("nonce-2"))) as [number, number];
    expect(other[0]).toBe(0);
    expect(other[1]).toBeGreaterThan(0);
  });

  it("lease-acquire: the same take twice gets the same token; another take while it is held gets none", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const acquire = luaCommand(admin, new URL("../../src/runs/lua/", import.meta.url), "lease-acquire");
    const k = [keys.lease("s"), keys.fence("s"), keys.leaseTake("s")];
    const first = (await acquire(k, [30_000, "nonce-1"])) as [number, number];
    expect(first).toEqual([1, 0]);
    expect(await acquire(k, [30_000, "nonce-1"])).toEqual([1, 0]);
    const other = (await acquire(k, [30_000, "nonce-2"])) as [number, number];
    expect(other[0]).toBe(0);
    expect(other[1]).toBeGreaterThan(0);
    // Released, then taken by another: the first take's nonce claims nothing any more.
    await admin.del(keys.lease("s"));
    expect(await acquire(k, [30_000, "nonce-2"])).toEqual([2, 0]);
    expect(((await acquire(k, [30_000, "nonce-1"])) as number[])[0]).toBe(0);
    // The leases module passes a new nonce per take.
    const leases = new SessionLeases(admin, keys, 30_000);
    const taken = await leases.tryAcquire("t");
    expect(taken.acquired).toBe(true);
    expect((await leases.tryAcquire("t")).acquired).toBe(false);
    if (taken.acquired) await taken.lease.release();
  });
});

describe("scripts run twice (answer lost, command sent again), checked on the scripts", () => {
  const session = "agent:main:twice";
  const turnOf = (runId: string, extra: Record<string, unknown> = {}) => ({
    runId,
    sessionKey: session,
    agentId: "main",
    sessionId: "s-1",
    text: "hi",
    step: "turn" as const,
    provenance: "user" as const,
    messageTs: Date.now(),
    enqueuedAt: Date.now(),
    ...extra,
  });

  it("turn-push: pushed once, then the entry changed, then sent again: still queued once", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const inbox = new Inbox(admin, keys, new RunRecords(admin, keys));
    const v1 = JSON.stringify({ key: session, agentId: "main", sessionId: "s-1", rev: 1 });
    await admin.set(keys.session(session), v1);
    const turn = turnOf(randomUUID());
    expect(await inbox.push(turn, { expectEntry: v1, ready: true })).toBe("ready");
    // A turn of the session finishing meanwhile updates its entry.
    await admin.set(keys.session(session), JSON.stringify({ ...JSON.parse(v1), rev: 2 }));
    // Sent again: it must say the run exists, not that the entry changed (the caller would push
    // the message again under a new runId).
    expect(await inbox.push(turn, { expectEntry: v1, ready: true })).toBe("exists");
    expect(await admin.llen(keys.inbox(session))).toBe(1);
  });

  it("run-finish: sent again after it began the next turn, which names it as its source: that turn stays", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const records = new RunRecords(admin, keys);
    const inbox = new Inbox(admin, keys, records);
    const leases = new SessionLeases(admin, keys, 30_000);
    const a = randomUUID();
    const b = randomUUID();
    await inbox.push(turnOf(a));
    const got = await inbox.acquireAndBegin(leases, session);
    if (!got.acquired || !got.begun || "corrupt" in got.begun) throw new Error("the test could not begin its turn");
    // The announce step of an agent-to-agent flow, in the same session: its source is run a.
    const announce = turnOf(b, {
      step: "announce",
      provenance: "inter_session",
      source: { sessionKey: "agent:main:requester", tool: "sessions_send", runId: a },
    });
    const finish = () =>
      records.finishStep(
        got.lease,
        a,
        "ok",
        { reply: "r" },
        { beginNext: true, pushes: [{ turn: announce }], expectEntries: [] },
      );
    const first = await finish();
    if ("changed" in first) throw new Error("no entry was checked");
    expect(first.finished).toBe(true);
    expect(JSON.parse(first.next![0]).runId).toBe(b);
    await finish();
    // b is still in flight, under the lease, running: its drainer goes on with it.
    const inflight = await admin.lrange(keys.inflight(session), 0, -1);
    expect(inflight.map((t) => JSON.parse(t).runId)).toEqual([b]);
    expect(await admin.get(keys.lease(session))).toBe(String(got.lease.token));
    expect(await records.get(b)).toMatchObject({ status: "running" });
    got.lease.released();
  });
});

describe("end to end: a drain's lease take and a finish, their answers lost", () => {
  it("the lease take answers with the turn it took: the turn runs at once, as its first attempt", async () => {
    const warm = await worked.rpc("agent", { sessionKey: "taken", message: "warm" });
    expect((await timedWait(worked, warm.runId, 10_000)).result).toMatchObject({ status: "ok" });
    // The next turn wakes the idle session: the drain's lease-begin names the session's fence.
    const fence = worked.svc.keys.fence("agent:main:taken");
    const t0 = Date.now();
    const r = await withLostAnswer(
      (sent) => sent.includes(fence),
      () => worked.rpc("agent", { sessionKey: "taken", message: "next" }),
    );
    const { result } = await timedWait(worked, r.runId, 40_000);
    expect(result).toMatchObject({ status: "ok", reply: "re: next" });
    // Well under the lease TTL (30 s) it used to wait out.
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await worked.svc.runs.get(r.runId)).toMatchObject({ attempts: 1 });
  });

  it("a finish: the turn is finished once, the session goes on at once, every line once", async () => {
    const warm = await worked.rpc("agent", { sessionKey: "finished", message: "warm" });
    expect((await timedWait(worked, warm.runId, 10_000)).result).toMatchObject({ status: "ok" });
    // run-finish.lua is the only command that names the dead letters.
    const deadLetters = worked.svc.keys.deadLetters();
    const t0 = Date.now();
    const second = await withLostAnswer(
      (sent) => sent.includes(deadLetters),
      () => worked.rpc("agent", { sessionKey: "finished", message: "second" }),
    );
    expect((await timedWait(worked, second.runId, 40_000)).result).toMatchObject({ status: "ok", reply: "re: second" });
    const third = await worked.rpc("agent", { sessionKey: "finished", message: "third" });
    expect((await timedWait(worked, third.runId, 40_000)).result).toMatchObject({ status: "ok", reply: "re: third" });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await worked.svc.runs.get(second.runId)).toMatchObject({ status: "ok", attempts: 1 });
    expectTranscript(worked, warm, [
      ["warm", "re: warm"],
      ["second", "re: second"],
      ["third", "re: third"],
    ]);
  });
});

describe("a finish sent again after its answer was lost", () => {
  it("is answered as the first run was: the run's bookkeeping (token counts) still reaches the session", async () => {
    const warm = await worked.rpc("agent", { sessionKey: "counted-finish", message: "warm" });
    expect((await timedWait(worked, warm.runId, 10_000)).result).toMatchObject({ status: "ok" });
    const deadLetters = worked.svc.keys.deadLetters(); // named only by run-finish.lua
    const r = await withLostAnswer(
      (sent) => sent.includes(deadLetters),
      () => worked.rpc("agent", { sessionKey: "counted-finish", message: "counted once" }),
    );
    expect((await timedWait(worked, r.runId, 40_000)).result).toMatchObject({ status: "ok", reply: "counted" });
    await settle(async () => (await worked.svc.sessions.get("agent:main:counted-finish"))?.inputTokens === 10, {
      what: "the finished run's tokens counted in its session",
    });
    expect(await worked.svc.sessions.get("agent:main:counted-finish")).toMatchObject({
      inputTokens: 10,
      outputTokens: 5,
    });
  });
});

describe("a transcript lock acquire sent again after its answer was lost", () => {
  it("answers acquired: the holder goes on at once instead of waiting for its own lock", async () => {
    const keys = new RedisKeys(uniquePrefix());
    const conn = createRedis(proxy.url, "worker");
    try {
      const lockTtlMs = 20_000;
      const lock = new TranscriptLock(conn, lockTtlMs, 30_000);
      const lk = {
        lock: keys.transcriptLock("f"),
        queue: keys.transcriptLockQueue("f"),
        heartbeats: keys.transcriptLockHeartbeats("f"),
      };
      const t0 = Date.now();
      const ran = await withLostAnswer(
        (sent) => sent.includes(lk.lock),
        () =>
          lock.run(lk, "f.jsonl", async (token) => {
            expect(await admin.get(lk.lock)).toBe(token);
            return Date.now() - t0;
          }),
      );
      expect(ran).toBeLessThan(lockTtlMs / 4);
      expect(await admin.exists(lk.lock, lk.queue, lk.heartbeats)).toBe(0);
    } finally {
      conn.disconnect();
    }
  });
});
