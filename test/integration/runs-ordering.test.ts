/**
 * Per-session serialization across real worker processes: many sessions × many messages, sent
 * concurrently through a gateway, processed by three `switchboard worker` OS processes. Every
 * message runs exactly once, in send order within its session, runs of one session never
 * overlap, and different sessions run in parallel (on more than one process).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type ChildHandle, type TestSystem } from "../helpers/system.js";
import {
  conversation,
  getRun,
  inbound,
  readTranscript,
  scriptConfig,
  spawnWorker,
  timedWait,
  type RunRecordBody,
} from "../fixtures/runs-support.js";

const SESSIONS = 20;
const MESSAGES = 15;
const WORKER_PROCESSES = 3;
/** Drain jobs (hence running turns) one worker process runs at once. */
const PER_PROCESS_CONCURRENCY = 2;

let sys: TestSystem;
const workers: ChildHandle[] = [];

beforeAll(async () => {
  sys = await startTestSystem(
    scriptConfig(
      [
        // Uneven run lengths so a reordering bug would show.
        { when: { regex: "slow" }, delayMs: 25, reply: "re: {{text}}" },
        { delayMs: 5, reply: "re: {{text}}" },
      ],
      { workers: { concurrency: PER_PROCESS_CONCURRENCY } },
    ),
    { gateway: true, workers: false },
  );
  workers.push(...(await Promise.all(Array.from({ length: WORKER_PROCESSES }, () => spawnWorker(sys.config)))));
}, 40_000);

afterAll(async () => {
  await Promise.allSettled(workers.map((w) => w.stop()));
  await sys?.close();
});

interface Sent {
  session: number;
  index: number;
  text: string;
  runId: string;
  sessionKey: string;
  sessionId: string;
}

describe("runs on BullMQ: ordering across worker processes", () => {
  it("runs every message exactly once, in order per session, sessions in parallel", async () => {
    // Each session's messages are sent one after another (send order = accepted order);
    // all sessions send at the same time.
    const sent: Sent[][] = await Promise.all(
      Array.from({ length: SESSIONS }, async (_, s) => {
        const out: Sent[] = [];
        for (let i = 0; i < MESSAGES; i++) {
          const text = `s${s}-m${i}${i % 3 === 1 ? "-slow" : ""}`;
          const r = await inbound(sys, `peer${s}`, text);
          out.push({ session: s, index: i, text, ...r });
        }
        return out;
      }),
    );
    const all = sent.flat();
    expect(all).toHaveLength(SESSIONS * MESSAGES);
    expect(new Set(all.map((m) => m.runId)).size).toBe(all.length);
    expect(new Set(all.map((m) => m.sessionKey)).size).toBe(SESSIONS);
    for (const msgs of sent) expect(new Set(msgs.map((m) => m.sessionId)).size).toBe(1); // no rotation mid-test

    // Every run finishes ok with its own reply.
    const waited = await Promise.all(all.map((m) => timedWait(sys, m.runId, 30_000)));
    waited.forEach(({ result }, i) => {
      expect(result, all[i]!.text).toMatchObject({ status: "ok", reply: `re: ${all[i]!.text}` });
    });

    const records = new Map<string, RunRecordBody>();
    for (const rec of await Promise.all(all.map((m) => getRun(sys, m.runId)))) records.set(rec.runId, rec);

    for (const msgs of sent) {
      const recs = msgs.map((m) => records.get(m.runId)!);
      for (const [i, rec] of recs.entries()) {
        expect(rec).toMatchObject({ status: "ok", sessionKey: msgs[i]!.sessionKey, reply: `re: ${msgs[i]!.text}` });
        expect(rec.attempts, "ran once, not re-run").toBe(1);
        expect(typeof rec.startedAt).toBe("number");
        expect(rec.endedAt!).toBeGreaterThanOrEqual(rec.startedAt!);
      }
      // Send order = start order, and a run of this session starts only after the previous one ended.
      for (let i = 1; i < recs.length; i++) {
        expect(recs[i]!.startedAt!, `${msgs[i]!.text} started before ${msgs[i - 1]!.text}`).toBeGreaterThanOrEqual(
          recs[i - 1]!.startedAt!,
        );
        expect(recs[i - 1]!.endedAt!, `${msgs[i - 1]!.text} overlaps ${msgs[i]!.text}`).toBeLessThanOrEqual(
          recs[i]!.startedAt!,
        );
      }
      // And sorted by start time, no two runs of the session overlap (independent of send order).
      const byStart = [...recs].sort((a, b) => a.startedAt! - b.startedAt!);
      for (let i = 1; i < byStart.length; i++)
        expect(byStart[i - 1]!.endedAt!).toBeLessThanOrEqual(byStart[i]!.startedAt!);

      // The transcript: each user line once, in send order, each followed by its one reply.
      const expected = msgs.flatMap((m) => [
        { role: "user", text: m.text },
        { role: "assistant", text: `re: ${m.text}` },
      ]);
      const lines = readTranscript(sys.config, msgs[0]!.sessionId);
      expect(lines[0]?.type).toBe("session");
      expect(conversation(lines)).toEqual(expected);
      const ids = lines.filter((l) => l.type === "message").map((l) => l.id);
      expect(new Set(ids).size).toBe(ids.length);
      // The operators' view through the gateway agrees with the file.
      const hist = await sys.rpc("chat.history", { sessionKey: msgs[0]!.sessionKey, limit: 1000 });
      expect(conversation(hist.messages.map((message: unknown) => ({ type: "message", message })))).toEqual(expected);

      // Nothing left behind for the session: inbox and in-flight slot empty, lease released.
      const { keys } = sys.svc;
      const key = msgs[0]!.sessionKey;
      expect(await sys.svc.redis.llen(keys.inbox(key))).toBe(0);
      expect(await sys.svc.redis.llen(keys.inflight(key))).toBe(0);
      expect(await sys.svc.redis.exists(keys.lease(key))).toBe(0);
    }

    // Different sessions did run at the same time. Peak concurrency of running turns: a turn runs
    // inside its session's drain job, one turn at a time, and one process runs at most
    // PER_PROCESS_CONCURRENCY drain jobs — so a peak above that proves several processes worked.
    const intervals = [...records.values()].map((r) => ({ s: r.startedAt!, e: r.endedAt!, key: r.sessionKey }));
    let crossSessionOverlaps = 0;
    for (let i = 0; i < intervals.length; i++) {
      for (let j = i + 1; j < intervals.length; j++) {
        const a = intervals[i]!;
        const b = intervals[j]!;
        if (a.key !== b.key && a.s < b.e && b.s < a.e) crossSessionOverlaps++;
      }
    }
    expect(crossSessionOverlaps).toBeGreaterThan(0);
    const events = intervals.flatMap((iv) => [
      { t: iv.s, d: 1 },
      { t: iv.e, d: -1 },
    ]);
    // Ends before starts at the same millisecond: touching intervals do not count as overlapping.
    events.sort((a, b) => a.t - b.t || a.d - b.d);
    let cur = 0;
    let peak = 0;
    for (const ev of events) peak = Math.max(peak, (cur += ev.d));
    expect(peak).toBeLessThanOrEqual(WORKER_PROCESSES * PER_PROCESS_CONCURRENCY);
    expect(peak, "more turns ran at once than one worker process can run").toBeGreaterThan(PER_PROCESS_CONCURRENCY);

    // The worker processes survived the load.
    for (const w of workers) expect(w.child.exitCode).toBeNull();
  }, 45_000);
});
