/**
 * Wake-ups (docs/design/runs.md, "Wake-ups"): with `workers.wake: "ready-list"` (the default) a
 * push into an idle session puts it on the ready list and a worker drains it without a BullMQ
 * job; what such a drain cannot finish goes to a drain job; the overdue-wake check re-arms a
 * wake whose drainer is gone and leaves alone one whose session lease is held. With
 * `"drain-job"` every wake is a drain job. A worker killed mid ready-list drain is covered in
 * runs-crash.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { cleanUp, deploy, getRun, onCleanUp, waitRun } from "../helpers/api.js";
import { FAST_WORKERS, startPeer, type TestSystem } from "../helpers/system.js";
import { inbound, scriptConfig } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { rearmLostPops, rearmOverdueWakes } from "../../src/workers/overdue-wakes.js";

afterEach(cleanUp);

const RULES = [{ reply: "re: {{text}}" }];

async function drainJobs(sys: TestSystem): Promise<number> {
  const counts = await sys.svc.queues.runs.getJobCounts();
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** A session `agent:main:<name>` with one turn queued by enqueueTurn, and its pending-wake member. */
async function wokenSession(sys: TestSystem, name: string): Promise<{ key: string; member: string }> {
  const { svc } = sys;
  const key = `agent:main:${name}`;
  const entry = await svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
  const turn = await enqueueTurn(svc, {
    sessionKey: key,
    agentId: "main",
    sessionId: entry.sessionId,
    text: "hi",
    step: "turn",
    provenance: "user",
  });
  return { key, member: `${turn.runId}|${key}` };
}

async function wakesLeft(sys: TestSystem): Promise<{ pending: number; ready: number }> {
  const { redis, keys } = sys.svc;
  return { pending: await redis.zcard(keys.pendingWakes()), ready: await redis.llen(keys.readyList()) };
}

describe("ready-list wake-ups", () => {
  it("turns into idle sessions are drained from the ready list, without a drain job, and leave no wake", async () => {
    const sys = await deploy(scriptConfig(RULES, { workers: { ...FAST_WORKERS } }));
    for (const from of ["ann", "ben", "cy"])
      for (const text of ["one", "two"]) {
        const run = await inbound(sys, from, text);
        expect(await waitRun(sys, run.runId)).toMatchObject({ status: "ok", reply: `re: ${text}` });
      }
    expect(await drainJobs(sys)).toBe(0);
    await settle(async () => (await wakesLeft(sys)).pending === 0, {
      what: "every ready-list drain cleared its pending wake when it ended",
    });
    expect(await wakesLeft(sys)).toEqual({ pending: 0, ready: 0 });
  });

  it("a backlog of readied sessions is drained by a worker that starts later (batch pops), once each", async () => {
    // The default lease (not FAST_WORKERS): the overdue-wake check re-arms a wake older than the
    // lease time as a drain job, and queueing the backlog may take longer than 2 s under load.
    const sys = await deploy(scriptConfig(RULES, { workers: { concurrency: 8 } }), {
      gateway: true,
      workers: false,
    });
    const runs = [];
    for (let i = 0; i < 30; i++) runs.push(await inbound(sys, `backlog-${i}`, `m${i}`));
    expect(await sys.svc.redis.llen(sys.svc.keys.readyList())).toBe(30);
    const worker = await startPeer(sys.config, { gateway: false, workers: {} });
    onCleanUp(() => worker.close());
    for (const [i, run] of runs.entries())
      expect(await waitRun(sys, run.runId)).toMatchObject({ status: "ok", reply: `re: m${i}` });
    for (const run of runs) expect((await getRun(sys, run.runId)).attempts).toBe(1);
    expect(await drainJobs(sys)).toBe(0);
    await settle(async () => (await wakesLeft(sys)).pending === 0, { what: "every wake of the backlog cleared" });
    expect(await wakesLeft(sys)).toEqual({ pending: 0, ready: 0 });
  });

  it("a session with more turns than one drain takes goes back on the ready list, not to a drain job", async () => {
    // The default lease, as above: 45 turns queued before the worker starts may take over 2 s.
    const sys = await deploy(scriptConfig(RULES), { gateway: true, workers: false });
    const runs = [];
    for (let i = 0; i < 45; i++) runs.push(await inbound(sys, "long", `n${i}`));
    const worker = await startPeer(sys.config, { gateway: false, workers: {} });
    onCleanUp(() => worker.close());
    for (const [i, run] of runs.entries())
      expect(await waitRun(sys, run.runId)).toMatchObject({ status: "ok", reply: `re: n${i}` });
    // In order, each once: every run started after the one before it ended.
    const records = await Promise.all(runs.map((r) => getRun(sys, r.runId)));
    for (let i = 1; i < records.length; i++)
      expect(records[i]!.startedAt!).toBeGreaterThanOrEqual(records[i - 1]!.endedAt!);
    expect(records.every((r) => r.attempts === 1)).toBe(true);
    expect(await drainJobs(sys)).toBe(0);
    await settle(async () => (await wakesLeft(sys)).pending === 0, { what: "the wake cleared after the last drain" });
    expect(await wakesLeft(sys)).toEqual({ pending: 0, ready: 0 });
  });

  it('with workers.wake "drain-job" a wake is a drain job and the ready list stays empty', async () => {
    const sys = await deploy(scriptConfig(RULES, { workers: { ...FAST_WORKERS, wake: "drain-job" } }));
    const run = await inbound(sys, "dee", "hello");
    expect(await waitRun(sys, run.runId)).toMatchObject({ status: "ok", reply: "re: hello" });
    // The run can be answered before its drain job is marked completed.
    await settle(async () => (await sys.svc.queues.runs.getJobCounts()).completed! >= 1, {
      what: "the drain job that ran the turn completed",
    });
    expect(await wakesLeft(sys)).toEqual({ pending: 0, ready: 0 });
  });

  it("a session whose lease is held elsewhere goes to a drain job, which runs it once the lease is free", async () => {
    const sys = await deploy(scriptConfig(RULES, { workers: { ...FAST_WORKERS } }));
    const first = await inbound(sys, "eve", "first");
    await waitRun(sys, first.runId);
    // An archive job, say, holds the session: the ready-list drain cannot take it.
    const held = await sys.svc.leases.tryAcquire(first.sessionKey);
    if (!held.acquired) throw new Error("the test could not take the lease");
    const second = await inbound(sys, "eve", "second");
    await settle(async () => (await drainJobs(sys)) > 0, {
      what: "the ready-list drain handed the busy session to a drain job",
    });
    expect((await getRun(sys, second.runId)).status).toBe("queued");
    await held.lease.release();
    expect(await waitRun(sys, second.runId)).toMatchObject({ status: "ok", reply: "re: second" });
    await settle(async () => (await wakesLeft(sys)).pending === 0, {
      what: "the wake cleared once a drain job had the session",
    });
  });

  it("a ready drain whose lease lapses mid-turn keeps its wake; the overdue check has the turn run again", async () => {
    const sys = await deploy(
      scriptConfig([{ when: { regex: "slow" }, delayMs: 2500, reply: "done: {{text}}" }, ...RULES], {
        workers: { ...FAST_WORKERS },
      }),
    );
    const run = await inbound(sys, "fay", "slow-1");
    await settle(async () => (await getRun(sys, run.runId)).status === "running", { what: "the slow turn running" });
    // The lease lapses with nobody else taking it (Redis lost it, or renewals stalled): the
    // holder's next renewal finds it gone and aborts the turn. Nothing else would wake the
    // session: its turn is in flight, so later pushes find it busy.
    await sys.svc.redis.del(sys.svc.keys.lease(run.sessionKey));
    const after = await inbound(sys, "fay", "after");
    expect(await waitRun(sys, run.runId, 20_000)).toMatchObject({ status: "ok", reply: "done: slow-1" });
    expect((await getRun(sys, run.runId)).attempts).toBe(2);
    expect(await waitRun(sys, after.runId)).toMatchObject({ status: "ok", reply: "re: after" });
  }, 30_000);

  it("the overdue check touches a wake whose lease is held and re-arms one whose drainer is gone", async () => {
    const sys = await deploy(scriptConfig(RULES), { gateway: true, workers: false });
    const { svc } = sys;
    const { key, member } = await wokenSession(sys, "overdue");
    // Readied by the push itself: on the ready list and pending, no drain job.
    expect(await svc.redis.lrange(svc.keys.readyList(), 0, -1)).toEqual([member]);
    expect(await svc.redis.zscore(svc.keys.pendingWakes(), member)).not.toBeNull();
    expect(await drainJobs(sys)).toBe(0);
    // Not a BullMQ job, so /metrics shows it.
    const metrics = String((await sys.get("/metrics")).body);
    expect(metrics).toMatch(/switchboard_ready_sessions\{[^}]*\} 1\n/);
    expect(metrics).toMatch(/switchboard_pending_wakes\{[^}]*\} 1\n/);

    // doctor: fine now; a minute later (no worker here) it warns about the untaken wake.
    const { checkQueues } = await import("../../src/doctor/checks.js");
    expect((await checkQueues(svc)).filter((f) => /woken over a minute/.test(f.message))).toEqual([]);
    const warned = (await checkQueues(svc, Date.now() + 61_000)).find((f) => /woken over a minute/.test(f.message));
    expect(warned).toMatchObject({ level: "warn", message: "1 session woken over a minute ago and not drained yet" });
    expect((await checkQueues(svc))[0]!.message).toMatch(/ready list 1$/);

    const held = await svc.leases.tryAcquire(key);
    if (!held.acquired) throw new Error("the test could not take the lease");
    const later = Date.now() + 60_000;
    expect(await rearmOverdueWakes(svc, 10_000, later)).toBe(0);
    expect(Number(await svc.redis.zscore(svc.keys.pendingWakes(), member))).toBe(later);
    expect(await drainJobs(sys)).toBe(0);

    await held.lease.release();
    expect(await rearmOverdueWakes(svc, 10_000, later + 60_000)).toBe(1);
    expect(await svc.redis.zscore(svc.keys.pendingWakes(), member)).toBeNull();
    // Retired from the ready list too: no worker pops it later for nothing.
    expect(await svc.redis.llen(svc.keys.readyList())).toBe(0);
    expect((await svc.queues.runs.getJobCounts()).waiting).toBe(1);
  });

  it("the lost-pop check re-arms only wakes that are off the ready list with no lease held", async () => {
    const sys = await deploy(scriptConfig(RULES), { gateway: true, workers: false });
    const { svc } = sys;
    const wake = (name: string) => wokenSession(sys, name);
    const queued = await wake("still-queued");
    const leased = await wake("leased");
    const lost = await wake("lost");
    // Two pops: one whose drain took the lease, one whose answer was lost.
    await svc.redis.lrem(svc.keys.readyList(), 1, leased.member);
    await svc.redis.lrem(svc.keys.readyList(), 1, lost.member);
    const held = await svc.leases.tryAcquire(leased.key);
    if (!held.acquired) throw new Error("the test could not take the lease");

    expect(await rearmLostPops(svc)).toBe(1);
    expect(await drainJobs(sys)).toBe(1);
    expect((await svc.queues.runs.getWaiting())[0]!.data).toEqual({ sessionKey: lost.key });
    expect(await svc.redis.zscore(svc.keys.pendingWakes(), lost.member)).toBeNull();
    // The other two are left as they were: on the ready list, or with their drainer.
    expect(await svc.redis.lrange(svc.keys.readyList(), 0, -1)).toEqual([queued.member]);
    expect(await svc.redis.zscore(svc.keys.pendingWakes(), leased.member)).not.toBeNull();
    expect(await rearmLostPops(svc)).toBe(0);
    await held.lease.release();

    // A ready list too long to read (over 10,000) is not looked through: the overdue check has it.
    const another = await wake("lost-behind-a-long-list");
    await svc.redis.lrem(svc.keys.readyList(), 1, another.member);
    await svc.redis.rpush(svc.keys.readyList(), ...Array.from({ length: 10_001 }, (_, i) => `filler-${i}|x`));
    expect(await rearmLostPops(svc)).toBe(0);
    expect(await svc.redis.zscore(svc.keys.pendingWakes(), another.member)).not.toBeNull();
  });
});
