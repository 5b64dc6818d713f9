/**
 * Retries and races found in review: a retried enqueue never queues twice but always wakes the
 * drainer; every script key stays in one Cluster slot; a sweep never rotates a session that
 * changed or got work after it was read; /stop keeps what dropped turns carried.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { rotateSession } from "../../src/rotation/rotate.js";
import { quietPeriod, settle } from "../helpers/settle.js";
import { waitRun } from "../helpers/api.js";
import { requeueStopped, STOPPED_TURN_ORPHANED_MS } from "../../src/runs/stop.js";
import { announceContinuation } from "../../src/subagents/announce.js";
import { subagentAnnounceJobId } from "../../src/queues/jobs.js";
import type { Turn } from "../../src/runs/turn.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({
    agents: {
      list: [
        {
          id: "main",
          runtime: {
            kind: "script",
            rules: [
              { when: { contains: "counted" }, delayMs: 800, reply: "counted", usage: { input: 1000, output: 500 } },
              { when: { contains: "slow" }, delayMs: 3000, reply: "slow done" },
              { reply: "ok: {{text}}" },
            ],
          },
        },
      ],
    },
  });
});
afterAll(async () => {
  await sys?.close();
});

describe("wake-ups", () => {
  it("only a push into an idle session adds a drain job; turns queued behind it ride the same drain", async () => {
    const key = "agent:main:wakes";
    const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const base = {
      sessionKey: key,
      agentId: "main",
      sessionId: entry.sessionId,
      step: "turn" as const,
      provenance: "user" as const,
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
    };
    const first = { ...base, runId: randomUUID(), text: "slow first" };
    expect(await sys.svc.inbox.push(first)).toBe("wake");
    const second = { ...base, runId: randomUUID(), text: "second" };
    expect(await sys.svc.inbox.push(second)).toBe("queued");
    expect(await sys.svc.inbox.push(second)).toBe("exists");
    // The pusher of `first` "died" before adding the drain job: the sweep's re-arm finds it.
    expect((await sys.svc.wakes.overdue(0, 10)).map((w) => w.sessionKey)).toContain(key);
    const { rearmOverdueWakes } = await import("../../src/workers/overdue-wakes.js");
    expect(await rearmOverdueWakes(sys.svc, 10_000, Date.now() + 60_000)).toBeGreaterThanOrEqual(1);
    expect(await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 15_000 })).toMatchObject({
      status: "ok",
      reply: "slow done",
    });
    expect(await sys.rpc("agent.wait", { runId: second.runId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "ok: second",
    });
    expect((await sys.svc.wakes.overdue(0, 10)).map((w) => w.sessionKey)).not.toContain(key);
  });
});

describe("pending wakes", () => {
  it("the drainer that takes a woken turn clears its pending wake (the pusher sends no clean-up)", async () => {
    const key = "agent:main:wake-cleared";
    const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const turn = await enqueueTurn(sys.svc, {
      sessionKey: key,
      agentId: "main",
      sessionId: entry.sessionId,
      text: "hello",
      step: "turn",
      provenance: "user",
    });
    expect(await sys.rpc("agent.wait", { runId: turn.runId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "ok: hello",
    });
    const pending = await sys.svc.redis.zrange(sys.svc.keys.pendingWakes(), 0, -1);
    expect(pending).not.toContain(`${turn.runId}|${key}`);
    expect(pending.filter((m) => m.endsWith(`|${key}`))).toEqual([]);
  });
});

describe("retried enqueues", () => {
  it("the same runId is queued once, even when pushed concurrently, and every call wakes the drain", async () => {
    const key = "agent:main:retry";
    const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const runId = randomUUID();
    const req = {
      runId,
      sessionKey: key,
      agentId: "main",
      sessionId: entry.sessionId,
      text: "once",
      step: "turn" as const,
      provenance: "user" as const,
    };
    await Promise.all(Array.from({ length: 8 }, () => enqueueTurn(sys.svc, req)));
    const waited = await sys.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(waited).toMatchObject({ status: "ok", reply: "ok: once" });
    const lines = (await sys.rpc("chat.history", { sessionKey: key })).messages;
    expect(lines.filter((m: { role: string }) => m.role === "user")).toHaveLength(1);

    // A first attempt that queued the turn but never woke a drainer: a retry wakes it.
    const stranded = randomUUID();
    await sys.svc.inbox.push({
      ...req,
      runId: stranded,
      text: "stranded",
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
    });
    await enqueueTurn(sys.svc, { ...req, runId: stranded, text: "stranded" });
    expect(await sys.rpc("agent.wait", { runId: stranded, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "ok: stranded",
    });
  });

  it("every key of the session upsert script carries the deployment's hash tag", () => {
    const base = sys.svc.keys.base;
    const withParent = sys.svc.sessions.upsertKeys(
      "agent:main:x",
      { agentId: "main", kind: "other" },
      sys.svc.keys.childrenIndex("agent:main:main"),
    );
    const withoutParent = sys.svc.sessions.upsertKeys("agent:main:x", { agentId: "main", kind: "other" });
    for (const k of [...withParent, ...withoutParent]) expect(k.startsWith(`${base}:`)).toBe(true);
    expect(base).toMatch(/^\{[^}]+\}$/);
  });
});

describe("sweep rotation is atomic with the session's state", () => {
  it("does not rotate a session written after it was read, nor one with queued work", async () => {
    const key = "agent:main:sweepy";
    const ident = { agentId: "main", kind: "other" as const };
    const read = await sys.svc.sessions.upsert(key, ident, { sessionId: randomUUID() });
    await sys.svc.sessions.upsert(key, ident, { displayName: "touched" }, { activity: "preserve" });
    expect(
      await rotateSession(sys.svc, read, { reason: "idle", archive: "caller", onlyIfUntouchedAndIdle: true }),
    ).toBeNull();

    const fresh = (await sys.svc.sessions.get(key))!;
    await sys.svc.inbox.push({
      runId: randomUUID(),
      sessionKey: key,
      agentId: "main",
      sessionId: fresh.sessionId,
      text: "queued",
      step: "turn",
      provenance: "user",
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
    });
    expect(
      await rotateSession(sys.svc, fresh, { reason: "idle", archive: "caller", onlyIfUntouchedAndIdle: true }),
    ).toBeNull();
    expect((await sys.svc.sessions.get(key))!.sessionId).toBe(fresh.sessionId);
    // As a /stop does: drop the queued turn, then (nothing to carry on) forget it.
    for await (const turns of sys.svc.inbox.drop(key, "stopped"))
      await sys.svc.inbox.stoppedDone(...turns.map((t) => t.runId));

    const idle = (await sys.svc.sessions.get(key))!;
    const rotated = await rotateSession(sys.svc, idle, {
      reason: "idle",
      archive: "caller",
      onlyIfUntouchedAndIdle: true,
    });
    expect(rotated?.sessionId).not.toBe(idle.sessionId);
  });
});

describe("/stop keeps what dropped turns carried", () => {
  it("a queued /new that is stopped still gets its old transcript archived", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "stopper" };
    const first = await sys.post("/v1/inbound", { ...dm, text: "hello" });
    await sys.rpc("agent.wait", { runId: first.body.runId, timeoutMs: 10_000 });
    const oldSessionId = first.body.sessionId;
    const slow = await sys.post("/v1/inbound", { ...dm, text: "slow one" });
    await settle(async () => (await sys.get(`/v1/runs/${slow.body.runId}`)).body.status === "running", {
      what: "the slow run running",
    });
    const reset = await sys.post("/v1/inbound", { ...dm, text: "/new" }); // queued behind the slow run
    expect(reset.body.isNewSession).toBe(true);
    const stop = await sys.post("/v1/inbound", { ...dm, text: "/stop" });
    expect(stop.body.stopped).toBe(2);
    const dir = join(sys.config.storage.dir, "agents", "main", "sessions");
    await settle(() => readdirSync(dir).some((f) => f.startsWith(`${oldSessionId}.jsonl.reset.`)), {
      what: "the old transcript archived as .reset",
      timeoutMs: 10_000,
    });
    expect(existsSync(join(dir, `${oldSessionId}.jsonl`))).toBe(false);
  });
});

describe("a /stop that dies after dropping the queued turns", () => {
  it("leaves them kept; the maintenance sweep queues their announce and archive, once", async () => {
    // A gateway without workers: the turns stay queued until the stop drops them.
    const gw = await startPeer(sys.config, { gateway: true, workers: false });
    try {
      const key = "agent:main:subagent:stop-dies";
      const entry = await gw.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
      const runId = randomUUID();
      const turn = await enqueueTurn(gw.svc, {
        runId,
        sessionKey: key,
        agentId: "main",
        sessionId: entry.sessionId,
        text: "task",
        step: "turn",
        provenance: "inter_session",
        archive: { sessionId: "old-session", kind: "reset" },
        continuation: announceContinuation(gw.svc, key, runId),
      });
      // What a stop does first, in one step (one turn: the whole inbox); then it dies.
      const dropped: Turn[] = (await gw.svc.inbox.drop(key, "stopped").next()).value ?? [];
      expect(dropped.map((t) => t.runId)).toEqual([turn.runId]);
      expect(await gw.svc.runs.get(runId)).toMatchObject({ status: "killed", error: "stopped" });
      expect(await gw.svc.redis.hlen(gw.svc.keys.stoppedTurns())).toBe(1);

      // A live stop's entry is left alone; one kept for over a minute is taken.
      expect(await requeueStopped(gw.svc, 100)).toBe(0);
      expect(await requeueStopped(gw.svc, 100, Date.now() + STOPPED_TURN_ORPHANED_MS + 1)).toBe(1);
      const announce = await gw.svc.queues.announce.getJob(subagentAnnounceJobId(key, runId));
      expect(announce?.data).toMatchObject({ childKey: key, runId, status: "killed", error: "stopped" });
      const archive = await gw.svc.queues.maintenance.getJob("archive-old-session-reset");
      expect(archive?.data).toMatchObject({ sessionKey: key, sessionId: "old-session", kind: "reset" });
      expect(await gw.svc.redis.hlen(gw.svc.keys.stoppedTurns())).toBe(0);
      expect(await requeueStopped(gw.svc, 100, Date.now() + STOPPED_TURN_ORPHANED_MS + 1)).toBe(0);
    } finally {
      await gw.close();
    }
  });
});

describe("a turn that finishes after its session was reset", () => {
  it("does not write its bookkeeping (tokens, model, aborted flag) into the new session", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "counter" };
    const first = await sys.post("/v1/inbound", { ...dm, text: "counted one" });
    await settle(async () => (await sys.get(`/v1/runs/${first.body.runId}`)).body.status === "running", {
      what: "the counted run running",
    });
    const reset = await sys.post("/v1/inbound", { ...dm, text: "/new" });
    expect(reset.body.isNewSession).toBe(true);
    expect((await sys.rpc("agent.wait", { runId: first.body.runId, timeoutMs: 10_000 })).status).toBe("ok");
    await sys.rpc("agent.wait", { runId: reset.body.runId, timeoutMs: 10_000 });
    const entry = await sys.svc.sessions.get(reset.body.sessionKey);
    expect(entry?.sessionId).toBe(reset.body.sessionId);
    expect(entry?.inputTokens).toBeUndefined();
    expect(entry?.totalTokens).toBeUndefined();
  });
});

describe("an archive job and a turn of the retired transcript still to run", () => {
  it("waits for the turn (handed back at shutdown): its lines end up in the archive, no file is left", async () => {
    // A gateway and a worker of the maintenance queue only: turns wait until a runs worker comes.
    const gw = await startTestSystem(
      { agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok: {{text}}" }] } }] } },
      { gateway: true, workers: false },
    );
    const maint = await startPeer(gw.config, { gateway: false, workers: { queues: ["maintenance"] } });
    try {
      const key = "agent:main:archive-after-handback";
      const old = await gw.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
      await gw.svc.transcripts.append("main", old.sessionId, [
        {
          type: "message",
          id: "first",
          timestamp: new Date().toISOString(),
          message: { role: "user", content: "first" },
        },
      ]);
      // A turn of the old transcript left in flight, as a hand-back leaves it (lease free).
      const turn = await enqueueTurn(gw.svc, {
        sessionKey: key,
        agentId: "main",
        sessionId: old.sessionId,
        text: "late",
        step: "turn",
        provenance: "user",
      });
      await gw.svc.redis.lmove(gw.svc.keys.inbox(key), gw.svc.keys.inflight(key), "LEFT", "RIGHT");
      // sessions.reset's rotation (after its stop, which leaves a turn in flight to its worker).
      expect(await rotateSession(gw.svc, old, { reason: "reset", archive: "job" })).not.toBeNull();
      const dir = join(gw.config.storage.dir, "agents", "main", "sessions");
      await quietPeriod(2500, "the archive job must not rename the transcript under the waiting turn");
      expect(existsSync(join(dir, `${old.sessionId}.jsonl`))).toBe(true);

      const runner = await startPeer(gw.config, { gateway: false, workers: { queues: ["runs"] } });
      try {
        await runner.svc.queues.runs.add("drain", { sessionKey: key }, { jobId: `drain-test-${turn.runId}` });
        expect((await waitRun(gw, turn.runId, 15_000)).status).toBe("ok");
        await settle(() => readdirSync(dir).some((f) => f.startsWith(`${old.sessionId}.jsonl.reset.`)), {
          what: "the old transcript archived once the turn ran",
          timeoutMs: 15_000,
        });
        expect(existsSync(join(dir, `${old.sessionId}.jsonl`))).toBe(false);
        const archived = readdirSync(dir).find((f) => f.startsWith(`${old.sessionId}.jsonl.reset.`))!;
        expect(readFileSync(join(dir, archived), "utf8")).toContain(`"${turn.runId}:u"`);
      } finally {
        await runner.close();
      }
    } finally {
      await maint.close();
      await gw.close();
    }
  }, 40_000);
});

describe("a reset between a caller's read of the session and its push", () => {
  /** Run `action` with `reset` done just before its push into `sessionKey`, as another gateway's reset landing then. */
  async function resetBeforePush<T>(sessionKey: string, reset: () => Promise<unknown>, action: () => Promise<T>) {
    const inbox = sys.svc.inbox;
    const push = inbox.push.bind(inbox);
    let pending = true;
    inbox.push = async (turn, opts) => {
      if (pending && turn.sessionKey === sessionKey) {
        pending = false;
        await reset();
      }
      return await push(turn, opts);
    };
    try {
      return await action();
    } finally {
      inbox.push = push;
    }
  }
  const transcriptDir = () => join(sys.config.storage.dir, "agents", "main", "sessions");
  const liveFiles = () => readdirSync(transcriptDir()).filter((f) => f.endsWith(".jsonl"));

  it("an inbound message runs in the session the reset made, and nothing is left in the retired one", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "reset-in-window" };
    const first = await sys.post("/v1/inbound", { ...dm, text: "hello" });
    await waitRun(sys, first.body.runId, 10_000);
    const key = first.body.sessionKey as string;
    const retired = first.body.sessionId as string;
    const reset = () => sys.rpc("sessions.reset", { key });
    const second = await resetBeforePush(key, reset, () => sys.post("/v1/inbound", { ...dm, text: "after the reset" }));
    expect(second.status).toBe(202);
    const current = await sys.svc.sessions.get(key);
    expect(current?.sessionId).not.toBe(retired);
    expect(second.body.sessionId).toBe(current?.sessionId);
    expect((await waitRun(sys, second.body.runId, 10_000)).status).toBe("ok");
    expect((await sys.svc.runs.get(second.body.runId))?.sessionId).toBe(current?.sessionId);
    await settle(() => readdirSync(transcriptDir()).some((f) => f.startsWith(`${retired}.jsonl.reset.`)), {
      what: "the retired transcript archived",
    });
    expect(liveFiles()).not.toContain(`${retired}.jsonl`);
    expect(readFileSync(join(transcriptDir(), `${current!.sessionId}.jsonl`), "utf8")).toContain("after the reset");
  });

  it("a /new whose own rotation is overtaken by another reset archives what it retired, then runs once", async () => {
    const dm = { channel: "tg", chatType: "dm", from: "double-reset" };
    const first = await sys.post("/v1/inbound", { ...dm, text: "hello" });
    await waitRun(sys, first.body.runId, 10_000);
    const key = first.body.sessionKey as string;
    const s0 = first.body.sessionId as string;
    const other = () => sys.rpc("sessions.reset", { key });
    const reset = await resetBeforePush(key, other, () => sys.post("/v1/inbound", { ...dm, text: "/new fresh start" }));
    expect(reset.status).toBe(202);
    expect(reset.body.isNewSession).toBe(true);
    expect((await waitRun(sys, reset.body.runId, 10_000)).status).toBe("ok");
    const current = await sys.svc.sessions.get(key);
    expect(reset.body.sessionId).toBe(current?.sessionId);
    // S0, the session this /new retired first, and the one the other reset retired: both archived.
    await settle(() => readdirSync(transcriptDir()).some((f) => f.startsWith(`${s0}.jsonl.reset.`)), {
      what: "the first retired transcript archived",
    });
    expect(liveFiles()).not.toContain(`${s0}.jsonl`);
    const mine = readFileSync(join(transcriptDir(), `${current!.sessionId}.jsonl`), "utf8");
    const asked = mine.split("\n").filter((l) => l.includes('"role":"user"') && l.includes("fresh start"));
    expect(asked).toHaveLength(1);
  });

  it("a turn pushed by a tool or RPC follows the reset to the new sessionId", async () => {
    const key = "agent:main:follow-reset";
    const old = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const next = await rotateSession(sys.svc, old, { reason: "reset", archive: "job" });
    const turn = await enqueueTurn(sys.svc, {
      sessionKey: key,
      agentId: "main",
      sessionId: old.sessionId, // read before the reset
      text: "followed",
      step: "turn",
      provenance: "inter_session",
    });
    expect(turn.sessionId).toBe(next?.sessionId);
    expect((await waitRun(sys, turn.runId, 10_000)).status).toBe("ok");
    expect((await sys.svc.runs.get(turn.runId))?.sessionId).toBe(next?.sessionId);
    expect(liveFiles()).not.toContain(`${old.sessionId}.jsonl`);
  });
});

describe("clocks and leftovers", () => {
  it("a pending wake is scored on Redis's clock, not on a pusher's clock that runs ahead", async () => {
    // A deployment of its own with no workers: nobody takes the wake before it is looked at.
    const gw = await startTestSystem(
      { agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok" }] } }] } },
      { gateway: true, workers: false },
    );
    try {
      const key = "agent:main:skewed-pusher";
      const entry = await gw.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
      vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 120_000 }); // this process is 2 min ahead
      let turn: Awaited<ReturnType<typeof enqueueTurn>>;
      try {
        turn = await enqueueTurn(gw.svc, {
          sessionKey: key,
          agentId: "main",
          sessionId: entry.sessionId,
          text: "skewed",
          step: "turn",
          provenance: "user",
        });
      } finally {
        vi.useRealTimers();
      }
      const score = Number(await gw.svc.redis.zscore(gw.svc.keys.pendingWakes(), `${turn.runId}|${key}`));
      const redisNow = await gw.svc.wakes.now();
      expect(Math.abs(score - redisNow)).toBeLessThan(10_000);
      // The overdue check reads Redis's clock too: this wake is not overdue yet, and is later.
      expect((await gw.svc.wakes.overdue(10_000, 100)).map((w) => w.sessionKey)).not.toContain(key);
      expect((await gw.svc.wakes.overdue(10_000, 100, redisNow + 60_000)).map((w) => w.sessionKey)).toContain(key);
    } finally {
      await gw.close();
    }
  });

  it("a session's fence counter expires a week after its last take (no key per session for ever)", async () => {
    const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "fenced", text: "hello" });
    await waitRun(sys, r.body.runId, 10_000);
    const ttl = await sys.svc.redis.pttl(sys.svc.keys.fence(r.body.sessionKey));
    expect(ttl).toBeGreaterThan(6 * 24 * 3600 * 1000);
    expect(ttl).toBeLessThanOrEqual(7 * 24 * 3600 * 1000);
  });
});

describe("an isolated agent call sent twice at once with one idempotency key", () => {
  it("rotates the session once: the run, the answer and the session agree", async () => {
    const first = await sys.rpc("agent", { sessionKey: "cron:isolated-twice", message: "first" });
    await waitRun(sys, first.runId, 10_000);
    const params = {
      sessionKey: "cron:isolated-twice",
      message: "isolated run",
      idempotencyKey: "same-key",
      sessionTarget: "isolated",
    };
    const [a, b] = await Promise.all([sys.rpc("agent", params), sys.rpc("agent", params)]);
    expect(a.runId).toBe(b.runId);
    expect(a.sessionId).toBe(b.sessionId);
    expect((await waitRun(sys, a.runId, 10_000)).status).toBe("ok");
    const entry = await sys.svc.sessions.get("agent:main:cron:isolated-twice");
    expect(entry?.sessionId).toBe(a.sessionId);
    expect(entry?.previousSessionId).toBe(first.sessionId);
    expect((await sys.svc.runs.get(a.runId))?.sessionId).toBe(a.sessionId);
  });
});
