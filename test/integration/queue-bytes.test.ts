/**
 * gateway.limits.maxQueuedBytes (docs/concepts/limits.md): a door's new turn that would take the
 * bytes of a session's queued turns past the limit is refused with 429 queue_full naming that
 * limit (a tool with a tool error), checked in the push itself; a turn into an empty inbox is
 * always queued; internal pushes always are. The inbox's byte count (`inbox-bytes:<session>`)
 * stays exactly the UTF-8 bytes of the turns in the inbox through every change: pushes (doors and
 * a finish's), begins (a drain's first turn and a finish's next), a crash's re-run, `/stop`, a
 * steer's stop of one run, resets and deletes; and it is gone when the inbox is empty.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptConfig } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { QUEUE_FULL_RETRY_AFTER_SECONDS, QueueFullError } from "../../src/errors/queue-full.js";
import { SessionLeases } from "../../src/runs/session-lease.js";
import { stopRun, stopSession } from "../../src/runs/stop.js";
import { serializeTurn, type Turn } from "../../src/runs/turn.js";
import { parseConfig } from "../../src/config/index.js";

const LIMIT = 8192;
const EURO = "€"; // 3 bytes of UTF-8, 1 UTF-16 unit: the limit counts bytes

let sys: TestSystem;
let worker: TestSystem | undefined;

beforeAll(async () => {
  sys = await startTestSystem(
    scriptConfig([{ delayMs: 2, reply: "re: {{text}}" }], {
      gateway: { limits: { maxQueuedBytes: LIMIT } },
      tools: { sessions: { visibility: "all" } },
    }),
    { gateway: true, workers: false },
  );
});

afterAll(async () => {
  await worker?.close();
  await sys?.close();
});

async function post(path: string, body: unknown) {
  const res = await fetch(sys.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
}

/** The session's queued turns and its byte count, read in one atomic step. */
async function snapshot(key: string): Promise<{ turns: string[]; bytes: number; count: number | null }> {
  const res = await sys.svc.redis
    .multi()
    .lrange(sys.svc.keys.inbox(key), 0, -1)
    .get(sys.svc.keys.inboxBytes(key))
    .exec();
  const turns = res![0]![1] as string[];
  const count = res![1]![1] as string | null;
  return {
    turns,
    bytes: turns.reduce((n, t) => n + Buffer.byteLength(t), 0),
    count: count === null ? null : Number(count),
  };
}

/** The count is the bytes queued; with nothing queued there is no count at all. */
async function expectExact(key: string): Promise<number> {
  const s = await snapshot(key);
  if (s.turns.length === 0) expect(s.count, `${key}: no count for an empty inbox`).toBeNull();
  else expect(s.count, `${key}: count of ${s.turns.length} turns`).toBe(s.bytes);
  return s.turns.length;
}

function turnOf(key: string, sessionId: string, text: string, extra: Partial<Turn> = {}): Turn {
  return {
    runId: randomUUID(),
    sessionKey: key,
    agentId: "main",
    sessionId,
    text,
    step: "turn",
    provenance: "user",
    enqueuedAt: Date.now(),
    messageTs: Date.now(),
    ...extra,
  };
}

async function session(key: string): Promise<string> {
  return (await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() }))
    .sessionId;
}

describe("maxQueuedBytes at the doors", () => {
  const runs: string[] = [];

  it("has a default of 64 MiB, and 0 switches it off", () => {
    expect(parseConfig({}).gateway.limits.maxQueuedBytes).toBe(64 * 1024 * 1024);
    expect(parseConfig({ gateway: { limits: { maxQueuedBytes: 0 } } }).gateway.limits.maxQueuedBytes).toBe(0);
    expect(() => parseConfig({ gateway: { limits: { maxQueuedBytes: -1 } } })).toThrow();
  });

  it("inbound: the turn that would pass the limit is refused with 429 queue_full naming maxQueuedBytes", async () => {
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    let key = "";
    for (let i = 1; i <= 10 && !refused; i++) {
      const r = await post("/v1/inbound", {
        channel: "telegram",
        chatType: "dm",
        from: "alice",
        text: `${i} ${EURO.repeat(1000)}`,
        messageId: `m${i}`,
      });
      if (r.status === 429) refused = r;
      else {
        expect(r.status, JSON.stringify(r.body)).toBe(202);
        runs.push(r.body.runId);
        key = r.body.sessionKey;
      }
    }
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(refused!.retryAfter).toBe(String(QUEUE_FULL_RETRY_AFTER_SECONDS));
    const { error } = refused!.body;
    expect(error.code).toBe("queue_full");
    expect(error.message).toContain(`gateway.limits.maxQueuedBytes (${LIMIT})`);
    expect(error.message).toContain(key);
    const said = /has (\d+) bytes queued in (\d+) turns, and this turn of (\d+) bytes/.exec(error.message);
    expect(said, error.message).not.toBeNull();
    const [queuedBytes, queued, turnBytes] = said!.slice(1).map(Number) as [number, number, number];
    const s = await snapshot(key);
    expect(queued).toBe(runs.length);
    expect(queuedBytes).toBe(s.bytes);
    expect(s.bytes).toBeLessThanOrEqual(LIMIT);
    expect(queuedBytes + turnBytes).toBeGreaterThan(LIMIT);
    await expectExact(key);
    // A message resent with the id of one already queued is answered with its run, not refused.
    const resent = await post("/v1/inbound", {
      channel: "telegram",
      chatType: "dm",
      from: "alice",
      text: `2 ${EURO.repeat(1000)}`,
      messageId: "m2",
    });
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ runId: runs[1], duplicate: true });
  });

  it("a turn larger than the limit is queued into an empty inbox, and the next one is refused", async () => {
    const big = "b".repeat(LIMIT + 1000);
    const r = await post("/v1/rpc/agent", { sessionKey: "agent:main:big", message: big, idempotencyKey: "big1" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    runs.push(r.body.result.runId);
    const next = await post("/v1/rpc/agent", { sessionKey: "agent:main:big", message: "hi", idempotencyKey: "big2" });
    expect(next.status).toBe(429);
    expect(next.body.error.code).toBe("queue_full");
    expect(next.body.error.message).toContain("maxQueuedBytes");
    expect(await expectExact("agent:main:big")).toBe(1);
  });

  it("sessions_send: a tool error with code queue_full and the byte limit", async () => {
    const r = await post("/v1/tools/sessions_send", {
      sessionKey: "agent:main:sender",
      args: { sessionKey: "agent:main:big", message: "hello", timeoutSeconds: 0 },
    });
    expect(r.status).toBe(200);
    expect(r.body.result ?? r.body).toMatchObject({
      status: "error",
      code: "queue_full",
      limitName: "maxQueuedBytes",
      limit: LIMIT,
      sessionKey: "agent:main:big",
    });
  });

  it("the push script: a resent push answers exists, a new one QueueFullError; internal pushes queue", async () => {
    const key = "agent:main:big";
    const run = await sys.svc.runs.get(runs.at(-1)!);
    const fresh = turnOf(key, run!.sessionId!, "x");
    const err = await sys.svc.inbox.push(fresh, { maxQueuedBytes: LIMIT }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueFullError);
    expect(err).toMatchObject({ code: "queue_full", limit: LIMIT, queued: 1 });
    expect(await sys.svc.runs.get(fresh.runId)).toBeNull();
    // Internal: no limit passed.
    const internal = await enqueueTurn(sys.svc, {
      sessionKey: key,
      agentId: "main",
      sessionId: fresh.sessionId,
      text: "internal",
      step: "turn",
      provenance: "inter_session",
    });
    runs.push(internal.runId);
    expect(await expectExact(key)).toBe(2);
    expect(await sys.svc.inbox.push(internal, { maxQueuedBytes: 1 })).toBe("exists");
  });

  it("once a worker runs, every turn runs and the counts are gone; the count was exact all along", async () => {
    worker = await startPeer(sys.config, { gateway: false, workers: {} });
    const keys = ["agent:main:big", (await sys.svc.runs.get(runs[0]!))!.sessionKey!];
    let done = false;
    const watching = (async () => {
      while (!done) for (const key of keys) await expectExact(key);
    })();
    for (const runId of runs) expect((await sys.rpc("agent.wait", { runId, timeoutMs: 20_000 })).status).toBe("ok");
    done = true;
    await watching;
    for (const key of keys) expect(await expectExact(key)).toBe(0);
    await worker.close();
    worker = undefined;
  });
});

describe("the inbox's byte count stays exact", () => {
  const leases = () => new SessionLeases(sys.svc.redis, sys.svc.keys, 30_000);

  it("through pushes, a drain's begin, a crash's re-run and a finish that pushes and begins", async () => {
    const key = "agent:main:counted";
    const other = "agent:main:counted-other";
    const sid = await session(key);
    const otherSid = await session(other);
    const turns = [1, 2, 3, 4].map((i) => turnOf(key, sid, `${i} ${EURO.repeat(100 * i)}`));
    for (const t of turns) await sys.svc.inbox.push(t);
    expect(await expectExact(key)).toBe(4);

    const l = leases();
    const first = await sys.svc.inbox.acquireAndBegin(l, key);
    if (!first.acquired || !first.begun || "corrupt" in first.begun) throw new Error("no turn begun");
    expect(first.begun.turn.runId).toBe(turns[0]!.runId);
    expect(await expectExact(key)).toBe(3);

    // The worker dies: its lease goes; the next drain runs the in-flight turn again. Nothing moves.
    await first.lease.release();
    const again = await sys.svc.inbox.acquireAndBegin(l, key);
    if (!again.acquired || !again.begun || "corrupt" in again.begun) throw new Error("no turn begun");
    expect(again.begun.turn.runId).toBe(turns[0]!.runId);
    expect(again.begun.record?.attempts).toBe(2);
    expect(await expectExact(key)).toBe(3);

    // A finish that queues a step into this session and another, and begins the next turn.
    const step = turnOf(key, sid, "a step", { provenance: "inter_session" });
    const elsewhere = turnOf(other, otherSid, `elsewhere ${EURO.repeat(50)}`, { provenance: "inter_session" });
    const res = await sys.svc.runs.finishStep(
      again.lease,
      turns[0]!.runId,
      "ok",
      { endedAt: Date.now() },
      { beginNext: true, pushes: [{ turn: step }, { turn: elsewhere }], expectEntries: [] },
    );
    expect(res).toMatchObject({ finished: true, pushed: ["queued", "wake"] });
    expect(await expectExact(key)).toBe(3); // turns 3, 4 and the step (turn 2 begun)
    expect(await expectExact(other)).toBe(1);

    // A steer's stop of one run, and a /stop of the rest: nothing queued, no count.
    expect(await stopRun(sys.svc, key, turns[3]!.runId)).toBe(true);
    expect(await expectExact(key)).toBe(2);
    await stopSession(sys.svc, key);
    expect(await expectExact(key)).toBe(0);
    await again.lease.release();
    await stopSession(sys.svc, other);
    expect(await expectExact(other)).toBe(0);
  });

  it("through sessions.reset and sessions.delete", async () => {
    for (const method of ["sessions.reset", "sessions.delete"]) {
      const key = `agent:main:via-${method.split(".")[1]}`;
      const sid = await session(key);
      for (let i = 0; i < 3; i++) await sys.svc.inbox.push(turnOf(key, sid, `${i} ${EURO.repeat(10)}`));
      expect(await expectExact(key)).toBe(3);
      await sys.rpc(method, { key });
      expect(await expectExact(key)).toBe(0);
      await sys.svc.inbox.push(turnOf(key, sid, "after"));
      expect(await expectExact(key)).toBe(1);
      await stopSession(sys.svc, key);
    }
  });

  it("a count gone wrong (an inbox changed by hand, an older release) is right again once it empties", async () => {
    const key = "agent:main:healed";
    const sid = await session(key);
    const a = turnOf(key, sid, "a");
    await sys.svc.inbox.push(a);
    // A turn pushed without counting (an older release), and a count set wrong by hand.
    const legacy = turnOf(key, sid, "legacy");
    await sys.svc.redis.rpush(sys.svc.keys.inbox(key), serializeTurn(legacy));
    await sys.svc.redis.set(sys.svc.keys.inboxBytes(key), 10 * LIMIT);
    // It refuses a door's turn for now (that is what the count says) ...
    await expect(sys.svc.inbox.push(turnOf(key, sid, "door"), { maxQueuedBytes: LIMIT })).rejects.toThrow(
      QueueFullError,
    );
    // ... and once the inbox has emptied, the next push sets it right whatever it said.
    const l = leases();
    const begun = await sys.svc.inbox.acquireAndBegin(l, key);
    if (!begun.acquired) throw new Error("lease held");
    await sys.svc.runs.finish(begun.lease, a.runId, "ok", { endedAt: Date.now() });
    expect(await sys.svc.inbox.begin(begun.lease)).not.toBeNull();
    await sys.svc.runs.finish(begun.lease, legacy.runId, "ok", { endedAt: Date.now() });
    expect(await sys.svc.inbox.depth(key)).toBe(0);
    await begun.lease.release();
    const door = turnOf(key, sid, "door");
    expect(await sys.svc.inbox.push(door, { maxQueuedBytes: LIMIT })).not.toBe("exists");
    expect(await expectExact(key)).toBe(1);

    // Undercounted (a turn not counted): the begin that takes it deletes a count at or below 0.
    await sys.svc.redis.rpush(sys.svc.keys.inbox(key), serializeTurn(turnOf(key, sid, `old ${"o".repeat(500)}`)));
    const l2 = await sys.svc.inbox.acquireAndBegin(l, key);
    if (!l2.acquired) throw new Error("lease held");
    await sys.svc.runs.finish(l2.lease, door.runId, "ok", { endedAt: Date.now() });
    await sys.svc.inbox.begin(l2.lease);
    expect(await expectExact(key)).toBe(0);
    await l2.lease.release();
    await stopSession(sys.svc, key);
  });

  it("a finished session leaves no count behind", async () => {
    await settle(async () => (await sys.svc.redis.keys(`${sys.svc.keys.inboxBytes("")}*`)).length === 0, {
      what: "no byte counts left",
      timeoutMs: 2000,
    });
  });
});
