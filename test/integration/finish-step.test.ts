/**
 * The finish that applies an agent-to-agent step (run-finish.lua through RunRecords.finishStep):
 * the next turns are queued in the same script as the run turning terminal, so finishing again
 * (a worker killed after the finish and its turn re-run) queues nothing twice; a conditional
 * push follows the late flag as it stands at the finish; a push decided on a session entry that
 * changed does nothing at all. No workers run here: the test holds the leases itself.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import type { Turn } from "../../src/runs/turn.js";
import type { LeaseHandle } from "../../src/runs/session-lease.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({}, { gateway: false, workers: false });
});
afterAll(async () => {
  await sys?.close();
});

async function session(name: string): Promise<{ key: string; raw: string; sessionId: string }> {
  const key = `agent:main:${name}-${randomUUID().slice(0, 8)}`;
  const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
  return { key, raw: (await sys.svc.redis.get(sys.svc.keys.session(key)))!, sessionId: entry.sessionId };
}

function turn(s: { key: string; sessionId: string }, text: string): Turn {
  const now = Date.now();
  return {
    runId: randomUUID(),
    sessionKey: s.key,
    agentId: "main",
    sessionId: s.sessionId,
    text,
    step: "reply",
    provenance: "inter_session",
    enqueuedAt: now,
    messageTs: now,
  };
}

/** Queue `t` and take it as the lease holder would (lease and first turn in one step). */
async function begin(t: Turn): Promise<LeaseHandle> {
  await sys.svc.inbox.push(t);
  const got = await sys.svc.inbox.acquireAndBegin(sys.svc.leases, t.sessionKey);
  if (!got.acquired) throw new Error("lease not acquired");
  expect(got.begun).toMatchObject({ turn: { runId: t.runId } });
  return got.lease;
}

async function inboxOf(key: string): Promise<string[]> {
  return await sys.svc.redis.lrange(sys.svc.keys.inbox(key), 0, -1);
}

describe("finishStep", () => {
  it("queues the next turns with the finish, once: finishing again queues nothing", async () => {
    const a = await session("fa");
    const b = await session("fb");
    const running = turn(a, "asked");
    const lease = await begin(running);
    const next = turn(b, "reply-1");
    const opts = {
      beginNext: false,
      pushes: [{ turn: next }],
      expectEntries: [
        { sessionKey: a.key, raw: a.raw },
        { sessionKey: b.key, raw: b.raw },
      ],
    };
    const first = await sys.svc.runs.finishStep(lease, running.runId, "ok", { reply: "hi" }, opts);
    expect(first).toEqual({ finished: true, next: null, pushed: ["wake"] });
    expect(await sys.svc.runs.get(running.runId)).toMatchObject({ status: "ok", reply: "hi" });
    expect(await sys.svc.runs.get(next.runId)).toMatchObject({ status: "queued", sessionKey: b.key });
    expect(await inboxOf(b.key)).toHaveLength(1);
    // Idle target: its pending wake is recorded in the same step (the sweep honours it if the
    // worker dies before adding the drain job).
    expect((await sys.svc.wakes.overdue(0, 100)).map((w) => w.sessionKey)).toContain(b.key);

    // The same finish again (a re-run that decided the same step): nothing more is queued.
    const again = await sys.svc.runs.finishStep(lease, running.runId, "ok", { reply: "hi" }, opts);
    expect(again).toEqual({ finished: false, next: null, pushed: ["skipped"] });
    expect(await inboxOf(b.key)).toHaveLength(1);
    await lease.release();
  });

  it("short and long fields, any text, are stored exactly; a finish sent again is still recognised", async () => {
    const a = await session("long");
    const running = turn(a, "asked");
    const lease = await begin(running);
    // Over the 200 characters that go as their own argument, with what JSON escapes and UTF-8 pairs.
    const reply = `"quoted" \\ back\nslash\u0000 \u{1F600} é 中文 ${"x".repeat(300)} \n end`;
    const model = 'short "m" \\ é';
    const opts = { beginNext: false, pushes: [], expectEntries: [] };
    const fields = { reply, model, resultOutput: JSON.stringify({ big: "y".repeat(500) }) };
    const first = await sys.svc.runs.finishStep(lease, running.runId, "ok", fields, opts);
    expect(first).toMatchObject({ finished: true });
    const rec = await sys.svc.runs.get(running.runId);
    expect(rec).toMatchObject({ status: "ok", reply });
    const raw = await sys.svc.redis.hgetall(sys.svc.keys.run(running.runId));
    expect({ model: raw.model, reply: raw.reply, resultOutput: raw.resultOutput }).toEqual(fields);
    // Sent again by the client (its nonce travels in the short list): answered as finished.
    expect(await sys.svc.runs.finishStep(lease, running.runId, "ok", fields, opts)).toMatchObject({ finished: false });
    await lease.release();
  });

  it("a turn into the finishing session itself is begun by the same finish", async () => {
    const a = await session("self");
    const running = turn(a, "reply-2");
    const lease = await begin(running);
    const announce = { ...turn(a, "announce"), step: "announce" as const };
    const res = await sys.svc.runs.finishStep(
      lease,
      running.runId,
      "ok",
      { reply: "REPLY_SKIP" },
      {
        beginNext: true,
        pushes: [{ turn: announce }],
        expectEntries: [{ sessionKey: a.key, raw: a.raw }],
      },
    );
    expect(res).toMatchObject({ finished: true, pushed: ["wake"] });
    const begun = "next" in res ? res.next : null;
    expect(begun?.[0]).toContain(announce.runId);
    expect(await sys.svc.runs.get(announce.runId)).toMatchObject({ status: "running" });
    // Taken by this holder at once: no wake left pending for it.
    expect((await sys.svc.wakes.overdue(0, 100)).map((w) => w.member)).not.toContain(`${announce.runId}|${a.key}`);
    await lease.release();
  });

  it("a conditional push follows the late flag as it stands at the finish", async () => {
    const a = await session("late-a");
    const b = await session("late-b");
    const flag = sys.svc.keys.a2aLate(randomUUID());
    for (const late of [false, true]) {
      const running = turn(a, `asked ${late}`);
      const lease = await begin(running);
      if (late) await sys.svc.redis.set(flag, "1", "EX", 60);
      const lateReply = turn(b, `late reply ${late}`);
      const res = await sys.svc.runs.finishStep(
        lease,
        running.runId,
        "ok",
        { reply: "x" },
        {
          beginNext: false,
          pushes: [{ turn: lateReply, ifExists: flag }],
          expectEntries: [],
        },
      );
      expect(res).toMatchObject({ finished: true, pushed: [late ? "wake" : "skipped"] });
      expect(await sys.svc.runs.get(lateReply.runId)).toEqual(
        late ? expect.objectContaining({ status: "queued" }) : null,
      );
      await lease.release();
    }
    await sys.svc.redis.del(flag);
  });

  it("decided on an entry that changed since: nothing is done, the current entry comes back", async () => {
    const a = await session("chg-a");
    const b = await session("chg-b");
    const running = turn(a, "asked");
    const lease = await begin(running);
    // b is reset after the step was decided on its old entry.
    await sys.svc.sessions.upsert(b.key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const current = await sys.svc.redis.get(sys.svc.keys.session(b.key));
    const stale = turn(b, "reply-1");
    const res = await sys.svc.runs.finishStep(
      lease,
      running.runId,
      "ok",
      { reply: "hi" },
      {
        beginNext: false,
        pushes: [{ turn: stale }],
        expectEntries: [{ sessionKey: b.key, raw: b.raw }],
      },
    );
    expect(res).toEqual({ changed: { sessionKey: b.key, raw: current } });
    expect(await sys.svc.runs.get(running.runId)).toMatchObject({ status: "running" });
    expect(await sys.svc.runs.get(stale.runId)).toBeNull();
    expect(await inboxOf(b.key)).toHaveLength(0);
    // A session expected not to exist that now exists counts as changed too.
    const res2 = await sys.svc.runs.finishStep(
      lease,
      running.runId,
      "ok",
      { reply: "hi" },
      {
        beginNext: false,
        pushes: [],
        expectEntries: [{ sessionKey: b.key, raw: null }],
      },
    );
    expect(res2).toEqual({ changed: { sessionKey: b.key, raw: current } });
    await lease.release();
  });
});
