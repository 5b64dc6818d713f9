/**
 * A worker process killed with SIGKILL in the middle of a slow run: another worker process
 * takes the session over (the run was woken from the ready list, so no BullMQ job stalls: its
 * pending wake goes overdue once the session lease expired, and the overdue-wake check re-arms
 * it as a drain job), the run is
 * finished exactly once (one user line, one reply, one delivery), and the session's later
 * messages still run after it, in order.
 */
import { afterEach, describe, expect, it } from "vitest";
import { FAST_WORKERS, type ChildHandle, type TestSystem } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp } from "../helpers/api.js";
import {
  conversation,
  expectTranscript,
  getRun,
  inbound,
  readTranscript,
  scriptConfig,
  spawnWorker,
  timedWait,
  waitRunning,
} from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";

// Long enough that starting a second worker process and serving another session fit inside it, also on a busy machine.
const SLOW_MS = 6000;

afterEach(cleanUp);

async function deployment(): Promise<TestSystem> {
  return await deploy(
    scriptConfig(
      [
        { when: { regex: "slow" }, delayMs: SLOW_MS, reply: "done: {{text}}" },
        { delayMs: 5, reply: "re: {{text}}" },
      ],
      { workers: { ...FAST_WORKERS } },
    ),
    { gateway: true, workers: false },
  );
}

async function worker(sys: TestSystem): Promise<ChildHandle> {
  const w = await spawnWorker(sys.config);
  onCleanUp(() => w.kill9());
  return w;
}

async function deliveredReplies(sys: TestSystem, sessionKey: string): Promise<string[]> {
  const r = await sys.get(`/v1/deliveries?sessionKey=${encodeURIComponent(sessionKey)}&limit=100`);
  expect(r.status).toBe(200);
  const deliveries = r.body.deliveries as { message: string; status: string }[];
  for (const d of deliveries) expect(d.status).toBe("delivered");
  return deliveries.map((d) => d.message);
}

describe("runs on BullMQ: worker crash", () => {
  it("a run whose worker was killed -9 is finished once by a later worker; the session goes on in order", async () => {
    const sys = await deployment();
    const a = await worker(sys);

    const slow = await inbound(sys, "alice", "slow-1");
    await waitRunning(sys, slow.runId);
    // Queued behind the slow run while it runs on A.
    const after1 = await inbound(sys, "alice", "after-1");
    const after2 = await inbound(sys, "alice", "after-2");
    expect((await getRun(sys, after1.runId)).status).toBe("queued");

    await a.kill9();
    expect(a.child.signalCode).toBe("SIGKILL");
    const killedAt = Date.now();
    // The dead worker wrote nothing: a turn's lines are written together when it ends.
    expect(conversation(readTranscript(sys.config, slow.sessionId))).toEqual([]);
    expect((await getRun(sys, slow.runId)).status).toBe("running");

    await worker(sys);
    const { result } = await timedWait(sys, slow.runId, 20_000);
    expect(result).toMatchObject({ status: "ok", reply: "done: slow-1" });
    // Recovery needs the dead worker's job lock and session lease to expire (~2 s with
    // FAST_WORKERS), then the whole slow run again.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(SLOW_MS);

    const rec = await getRun(sys, slow.runId);
    expect(rec).toMatchObject({ status: "ok", reply: "done: slow-1", attempts: 2 });
    // The re-run came from the drain job the overdue-wake check added for the lost wake.
    const { active, completed } = await sys.svc.queues.runs.getJobCounts("active", "completed");
    expect(active! + completed!).toBeGreaterThanOrEqual(1);
    const r1 = (await timedWait(sys, after1.runId, 10_000)).result;
    const r2 = (await timedWait(sys, after2.runId, 10_000)).result;
    expect(r1).toMatchObject({ status: "ok", reply: "re: after-1" });
    expect(r2).toMatchObject({ status: "ok", reply: "re: after-2" });
    const [rec1, rec2] = await Promise.all([getRun(sys, after1.runId), getRun(sys, after2.runId)]);
    expect(rec1.attempts).toBe(1);
    expect(rec2.attempts).toBe(1);
    expect(rec1.startedAt!).toBeGreaterThanOrEqual(rec.endedAt!);
    expect(rec2.startedAt!).toBeGreaterThanOrEqual(rec1.endedAt!);

    expectTranscript(sys, slow, [
      ["slow-1", "done: slow-1"],
      ["after-1", "re: after-1"],
      ["after-2", "re: after-2"],
    ]);
    // One reply delivery per run, the re-run's included (deterministic delivery job ids).
    await settle(async () => (await deliveredReplies(sys, slow.sessionKey)).length >= 3, {
      what: "3 replies delivered on the slow session, the re-run's included",
      timeoutMs: 10_000,
    });
    const delivered = await deliveredReplies(sys, slow.sessionKey);
    expect([...delivered].sort()).toEqual(["done: slow-1", "re: after-1", "re: after-2"]);
    // Nothing left in flight or queued, lease released.
    const { keys, redis } = sys.svc;
    expect(await redis.llen(keys.inbox(slow.sessionKey))).toBe(0);
    expect(await redis.llen(keys.inflight(slow.sessionKey))).toBe(0);
  }, 45_000);

  it("with two workers up, killing the one that holds the run hands it to the other", async () => {
    const sys = await deployment();
    const a = await worker(sys);
    const slow = await inbound(sys, "bob", "slow-2");
    await waitRunning(sys, slow.runId);
    // Only A was up when the run started, so A holds it; B joins idle.
    const b = await worker(sys);
    const other = await inbound(sys, "carol", "hello");
    // B (or A) serves other sessions meanwhile; bob's run is still A's first attempt.
    expect((await timedWait(sys, other.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: hello" });
    expect(await getRun(sys, slow.runId)).toMatchObject({ status: "running", attempts: 1 });

    await a.kill9();
    const next = await inbound(sys, "bob", "after-kill");
    const { result } = await timedWait(sys, slow.runId, 20_000);
    expect(result).toMatchObject({ status: "ok", reply: "done: slow-2" });
    expect(await getRun(sys, slow.runId)).toMatchObject({ status: "ok", attempts: 2 });
    expect((await timedWait(sys, next.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after-kill" });
    const [slowRec, nextRec] = await Promise.all([getRun(sys, slow.runId), getRun(sys, next.runId)]);
    expect(nextRec.startedAt!).toBeGreaterThanOrEqual(slowRec.endedAt!);

    expectTranscript(sys, slow, [
      ["slow-2", "done: slow-2"],
      ["after-kill", "re: after-kill"],
    ]);
    expect(b.child.exitCode).toBeNull();
  }, 45_000);
});
