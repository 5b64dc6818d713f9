/**
 * `agent.wait` is answered from Redis by any gateway: waits on a gateway that did not accept
 * the message, waits started before the run ends (woken by the notification, not the slow
 * poll), late waits on finished runs (at once), short timeouts (the run goes on), and `/stop`
 * (waiters of the running and the queued runs are told `killed` promptly).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { conversation, getRun, inbound, readTranscript, scriptConfig, timedWait } from "../fixtures/runs-support.js";
import { pace, settle } from "../helpers/settle.js";
import { notificationRecord } from "../../src/runs/run-records.js";

const SLOW_MS = 1200;
const LONG_MS = 8000;

/** Gateway + workers: accepts the messages. */
let a: TestSystem;
/** Gateway only, same deployment: answers the waits. */
let b: TestSystem;

beforeAll(async () => {
  a = await startTestSystem(
    scriptConfig([
      { when: { regex: "^long" }, delayMs: LONG_MS, reply: "done: {{text}}" },
      { when: { regex: "^slow" }, delayMs: SLOW_MS, reply: "done: {{text}}" },
      { delayMs: 5, reply: "re: {{text}}" },
    ]),
  );
  b = await startPeer(a.config, { gateway: true, workers: false });
  expect(b.url).not.toBe(a.url);
  // Warm both gateways' HTTP paths so timings below measure the waits, not first-request setup.
  await Promise.all([a.get("/healthz"), b.get("/healthz")]);
});

afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe("runs on BullMQ: agent.wait", () => {
  it("a wait on another gateway, started before the run finishes, resolves as soon as it finishes", async () => {
    const r = await inbound(a, "w1", "slow-1");
    const pending = timedWait(b, r.runId, 10_000);
    const before = await getRun(b, r.runId);
    expect(["queued", "running"]).toContain(before.status);

    const { result, ms } = await pending;
    const answeredAt = Date.now();
    expect(result).toMatchObject({ runId: r.runId, status: "ok", reply: "done: slow-1" });
    expect(ms).toBeGreaterThanOrEqual(SLOW_MS - 100); // it really waited for the run
    // Woken by the run-done notification, not by the 2 s safety poll.
    expect(answeredAt - result.endedAt).toBeLessThan(500);
    expect(result.startedAt).toBeLessThanOrEqual(result.endedAt);
  });

  it("a wait on a finished run answers at once, on any gateway", async () => {
    const r = await inbound(a, "w2", "quick");
    expect((await timedWait(a, r.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: quick" });
    for (const g of [b, a, b]) {
      const { result, ms } = await timedWait(g, r.runId, 10_000);
      expect(result).toMatchObject({ runId: r.runId, status: "ok", reply: "re: quick" });
      expect(ms).toBeLessThan(200);
    }
    // timeoutMs 0 on a finished run is an answer too, not a timeout.
    expect((await timedWait(b, r.runId, 0)).result).toMatchObject({ status: "ok", reply: "re: quick" });
  });

  it("a wait for a run that just finished is answered from the notification every gateway got", async () => {
    const r = await inbound(a, "w-recent", "quick");
    expect((await timedWait(a, r.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: quick" });
    // Gateway b never waited for it, yet answers after the record is gone from Redis: from the
    // finished record published with the notification, which b kept as it came.
    await settle(async () => (await b.rpc("agent.wait", { runId: r.runId, timeoutMs: 0 })).status === "ok", {
      what: "gateway b answers the finished run",
    });
    await a.svc.redis.del(a.svc.keys.run(r.runId));
    expect((await timedWait(b, r.runId, 1000)).result).toMatchObject({ status: "ok", reply: "re: quick" });
    // A run b has no notification for is read: gone from Redis, it is unknown.
    const other = await b.post("/v1/rpc/agent.wait", { runId: "no-such-run-id", timeoutMs: 0 });
    expect(other.body.error?.code).toBe("run_not_found");
  });

  it("the run-done notification carries the finished record exactly as a read of it gives", async () => {
    const sub = a.svc.redis.duplicate();
    const payloads: string[] = [];
    try {
      sub.on("message", (_ch: string, msg: string) => payloads.push(msg));
      await sub.subscribe(a.svc.keys.runDoneChannel());
      const r = await inbound(a, "w-notified", "quick");
      await settle(async () => payloads.some((p) => p.startsWith(`${r.runId}\n`)), { what: "the notification" });
      const payload = payloads.find((p) => p.startsWith(`${r.runId}\n`))!;
      const published = notificationRecord(payload.slice(r.runId.length + 1));
      // Read back inside the finish: the same fields a read gives, terminalAt (Redis's clock) included.
      expect(published).toEqual(await a.svc.runs.get(r.runId));
      expect(published).toMatchObject({ runId: r.runId, status: "ok", reply: "re: quick" });
      expect(published?.terminalAt).toBeGreaterThan(0);
      // Not decodable as a record: a runId alone, garbage or a list with a non-string.
      expect(notificationRecord("not json")).toBeNull();
      expect(notificationRecord('["status", 1]')).toBeNull();
    } finally {
      sub.disconnect();
    }
  });

  it("a wait with a short timeout returns status timeout, and the run still finishes ok", async () => {
    const r = await inbound(a, "w3", "slow-3");
    const { result, ms } = await timedWait(b, r.runId, 300);
    expect(result).toMatchObject({ runId: r.runId, status: "timeout" });
    expect(result.reply).toBeUndefined();
    expect(["queued", "running"]).toContain(result.runStatus);
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(SLOW_MS);

    const later = await timedWait(b, r.runId, 10_000);
    expect(later.result).toMatchObject({ status: "ok", reply: "done: slow-3" });
    expect(await getRun(a, r.runId)).toMatchObject({ status: "ok", reply: "done: slow-3", attempts: 1 });
  });

  it("a wait on an unknown run ends with run_not_found when its timeout is up", async () => {
    const t0 = performance.now();
    const res = await b.post("/v1/rpc/agent.wait", { runId: "00000000-0000-4000-8000-000000000000", timeoutMs: 300 });
    expect(res.body).toMatchObject({ ok: false, error: { code: "run_not_found" } });
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it("/stop on the session makes waiters of the running and the queued runs get killed promptly", async () => {
    const running = await inbound(a, "w4", "long-4");
    await settle(async () => (await getRun(a, running.runId)).status === "running", {
      what: "run long-4 running",
      timeoutMs: 10_000,
      stepMs: 25,
    });
    const queued = await inbound(a, "w4", "queued-behind");
    expect((await getRun(a, queued.runId)).status).toBe("queued");
    const waitRunning = timedWait(b, running.runId, 20_000);
    const waitQueued = timedWait(b, queued.runId, 20_000);

    const stopAt = Date.now();
    const stop = await a.post("/v1/inbound", { channel: "telegram", chatType: "dm", from: "w4", text: "/stop" });
    expect(stop.status).toBe(202);
    expect(stop.body).toMatchObject({ ok: true, command: "stop", sessionKey: running.sessionKey, stopped: 2 });

    const [wr, wq] = await Promise.all([waitRunning, waitQueued]);
    expect(wr.result).toMatchObject({ runId: running.runId, status: "killed" });
    expect(wq.result).toMatchObject({ runId: queued.runId, status: "killed" });
    expect(wr.result.reply).toBeUndefined();
    // Promptly: the 8 s run was aborted, not waited out.
    expect(Date.now() - stopAt).toBeLessThan(1500);
    expect(await getRun(b, running.runId)).toMatchObject({ status: "killed" });
    expect(await getRun(b, queued.runId)).toMatchObject({ status: "killed" });

    // The session goes on: the next message runs normally, after the killed one.
    const next = await inbound(a, "w4", "after-stop");
    expect((await timedWait(b, next.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after-stop" });
    const lines = readTranscript(a.config, running.sessionId);
    expect(conversation(lines)).toEqual([
      { role: "user", text: "long-4" },
      { role: "assistant", text: "" }, // the aborted turn's marker line
      { role: "user", text: "after-stop" },
      { role: "assistant", text: "re: after-stop" },
    ]);
    const aborted = lines.find((l) => l.id === `${running.runId}:a`);
    expect(aborted?.message?.stopReason).toBe("aborted");
    // The queued run never reached a worker: nothing of it in the transcript.
    expect(lines.some((l) => l.runId === queued.runId)).toBe(false);
  });

  it("/stop right after the message, before its run is known to have started, is never lost", async () => {
    // Each stop lands somewhere between "still queued", "taken by a worker but not started yet"
    // and "running"; whichever, the run ends killed and its waiter is told at once.
    const SESSIONS = 16;
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_, i) => {
        await pace(i * 5, "spread the stops over queued, taken and running");
        const from = `race${i}`;
        const r = await inbound(a, from, "long-race");
        const waiting = timedWait(b, r.runId, 20_000);
        const stop = await a.post("/v1/inbound", { channel: "telegram", chatType: "dm", from, text: "/stop" });
        const stopAt = Date.now();
        expect(stop.body).toMatchObject({ command: "stop", stopped: 1 });
        const { result } = await waiting;
        expect(result, from).toMatchObject({ runId: r.runId, status: "killed" });
        expect(Date.now() - stopAt).toBeLessThan(2000);
        expect((await getRun(a, r.runId)).status).toBe("killed");
      }),
    );
  });
});
