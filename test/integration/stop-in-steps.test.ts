/**
 * `/stop` of a long inbox works in bounded steps (stop-queued.lua, src/runs/stop.ts): every turn
 * queued when the stop began is dropped once (record `killed`, waiters told once, its announce
 * queued once), a turn pushed after the stop began stays queued, a stop that dies between its
 * steps is finished by the maintenance sweep, and no single script call holds Redis for long
 * (each step takes at most STOP_STEP_TURNS turns and STOP_STEP_BYTES bytes past its first turn;
 * measured with SLOWLOG).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { newRedis } from "../helpers/context.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { settle, quietPeriod } from "../helpers/settle.js";
import { requeueStopped, stopSession, STOPPED_TURN_ORPHANED_MS } from "../../src/runs/stop.js";
import { STOP_CUT_TTL_MS, STOP_STEP_BYTES, STOP_STEP_TURNS } from "../../src/runs/inbox.js";
import { announceContinuation } from "../../src/subagents/announce.js";
import { subagentAnnounceJobId } from "../../src/queues/jobs.js";
import { serializeTurn, type Turn } from "../../src/runs/turn.js";

let sys: TestSystem;
/** Its own Redis: one test turns the slow log on for every command, which is the server's. */
let redis: PrivateRedis;
let sub: Redis;
/** run-done notifications seen, per runId. */
const published = new Map<string, number>();

beforeAll(async () => {
  // No workers: queued turns stay queued until a stop drops them.
  redis = await startPrivateRedis();
  sys = await startTestSystem({ redis: { url: redis.url } }, { gateway: false, workers: false });
  sub = newRedis(redis.url);
  await sub.subscribe(sys.svc.keys.runDoneChannel());
  sub.on("message", (_channel: string, message: string) => {
    const runId = message.split("\n")[0]!;
    published.set(runId, (published.get(runId) ?? 0) + 1);
  });
});

afterAll(async () => {
  sub?.disconnect();
  await sys?.close();
  await redis?.cleanup();
});

/** Queue `n` turns into `key` (every fifth carries a sub-agent announce), as a door would. */
async function queue(key: string, n: number, text = (i: number) => `turn ${i}`): Promise<Turn[]> {
  const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
  const turns: Turn[] = [];
  for (let i = 0; i < n; i++) {
    const runId = randomUUID();
    const turn: Turn = {
      runId,
      sessionKey: key,
      agentId: "main",
      sessionId: entry.sessionId,
      text: text(i),
      step: "turn",
      provenance: "inter_session",
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
      ...(i % 5 === 0 ? { continuation: announceContinuation(sys.svc, key, runId) } : {}),
    };
    expect(await sys.svc.inbox.push(turn)).not.toBe("exists");
    turns.push(turn);
  }
  return turns;
}

/** An `svc` whose inbox records each step of a stop and runs `afterFirst` after its first. */
function watched(steps: Turn[][], afterFirst: () => Promise<void> = async () => {}) {
  const inbox = Object.create(sys.svc.inbox) as typeof sys.svc.inbox;
  inbox.drop = async function* (sessionKey: string, error: string) {
    for await (const step of sys.svc.inbox.drop(sessionKey, error)) {
      steps.push(step);
      yield step;
      if (steps.length === 1) await afterFirst();
    }
  };
  return { ...sys.svc, inbox };
}

async function expectKilledOnce(turns: Turn[]): Promise<void> {
  for (const t of turns) expect((await sys.svc.runs.get(t.runId))?.status, t.runId).toBe("killed");
  await settle(() => turns.every((t) => published.has(t.runId)), { what: "every drop published", timeoutMs: 5000 });
  await quietPeriod(200, "a second notification would arrive by now");
  for (const t of turns) expect(published.get(t.runId), t.runId).toBe(1);
  for (const t of turns.filter((x) => x.continuation)) {
    const job = await sys.svc.queues.announce.getJob(subagentAnnounceJobId(t.sessionKey, t.runId));
    expect(job?.data, t.runId).toMatchObject({ runId: t.runId, status: "killed", error: "stopped" });
  }
}

async function expectNothingLeftAside(): Promise<void> {
  expect(await sys.svc.redis.hlen(sys.svc.keys.stoppedTurns())).toBe(0);
  expect(await sys.svc.redis.zcard(sys.svc.keys.stops())).toBe(0);
  expect(await sys.svc.redis.keys(`${sys.svc.keys.stopList("")}*`)).toEqual([]);
}

describe("/stop of a long inbox, in steps", () => {
  it("drops every turn queued when it began, each once, in bounded steps; a turn pushed after stays", async () => {
    const key = "agent:main:subagent:many";
    const turns = await queue(key, 2 * STOP_STEP_TURNS + 50);
    const steps: Turn[][] = [];
    let late: Turn | undefined;
    const svc = watched(steps, async () => {
      // Pushed after the stop's first step: not one of the turns it drops.
      [late] = await queue(key, 1, () => "after the stop began");
    });

    expect(await stopSession(svc, key)).toBe(turns.length);

    expect(steps.length).toBe(3);
    for (const step of steps) expect(step.length).toBeLessThanOrEqual(STOP_STEP_TURNS);
    const dropped = steps.flat().map((t) => t.runId);
    expect(dropped).toEqual(turns.map((t) => t.runId)); // all of them, in order, none twice
    await expectKilledOnce(turns);
    await expectNothingLeftAside();

    // The late turn is queued as usual, and the inbox's byte count is its alone.
    expect(await sys.svc.runs.get(late!.runId)).toMatchObject({ status: "queued" });
    const queued = await sys.svc.redis.lrange(sys.svc.keys.inbox(key), 0, -1);
    expect(queued).toEqual([serializeTurn(late!)]);
    expect(Number(await sys.svc.redis.get(sys.svc.keys.inboxBytes(key)))).toBe(Buffer.byteLength(queued[0]!));
  });

  it("a stop that dies between its steps is finished by the maintenance sweep, each turn once", async () => {
    const key = "agent:main:subagent:dies";
    const turns = await queue(key, STOP_STEP_TURNS + 30);
    // The stop's first step, then it dies: its turns not even carried on.
    const first = (await sys.svc.inbox.drop(key, "stopped").next()).value as Turn[];
    expect(first.length).toBe(STOP_STEP_TURNS);
    expect(await sys.svc.redis.llen(sys.svc.keys.inbox(key))).toBe(0);
    expect(await sys.svc.redis.zcard(sys.svc.keys.stops())).toBe(1);
    const [late] = await queue(key, 1, () => "after the stop began");

    // A stop that made progress within the minute is left alone.
    expect(await requeueStopped(sys.svc, 500)).toBe(0);
    expect(await sys.svc.runs.get(turns.at(-1)!.runId)).toMatchObject({ status: "queued" });
    expect(await requeueStopped(sys.svc, 500, Date.now() + STOPPED_TURN_ORPHANED_MS + 1)).toBe(turns.length);

    await expectKilledOnce(turns);
    await expectNothingLeftAside();
    expect(await requeueStopped(sys.svc, 500, Date.now() + STOPPED_TURN_ORPHANED_MS + 1)).toBe(0);
    expect(await sys.svc.runs.get(late!.runId)).toMatchObject({ status: "queued" });
    expect(await sys.svc.inbox.depth(key)).toBe(1);
  });

  it("a whole stop's first step sent again (resent after a reconnect) drops no turn pushed after it", async () => {
    const key = "agent:main:subagent:resent-cut";
    const before = await queue(key, 3);
    // Record the script calls the stop makes, so its first step can be sent again exactly as sent.
    type StopLua = (keys: string[], argv: unknown[]) => Promise<unknown>;
    const inbox = sys.svc.inbox as unknown as { stopLua: StopLua };
    const stopLua = inbox.stopLua;
    const calls: [string[], unknown[]][] = [];
    inbox.stopLua = (keys, argv) => {
      calls.push([keys, argv]);
      return stopLua(keys, argv);
    };
    try {
      expect(await stopSession(sys.svc, key)).toBe(before.length);
    } finally {
      inbox.stopLua = stopLua;
    }
    // One step did it all: its own list emptied and deleted.
    expect(calls.length).toBe(1);
    await expectKilledOnce(before);
    await expectNothingLeftAside();

    const after = await queue(key, 2, (i) => `after the stop ${i}`);
    const [keys, argv] = calls[0]!;
    expect(await stopLua(keys, argv)).toEqual([0, []]);
    for (const t of after) expect((await sys.svc.runs.get(t.runId))?.status, t.runId).toBe("queued");
    const queued = await sys.svc.redis.lrange(sys.svc.keys.inbox(key), 0, -1);
    expect(queued).toEqual(after.map(serializeTurn));
    expect(Number(await sys.svc.redis.get(sys.svc.keys.inboxBytes(key)))).toBe(
      queued.reduce((n, raw) => n + Buffer.byteLength(raw), 0),
    );
    await expectNothingLeftAside();
    // The cut's record outlives any resend, then goes by itself.
    const ttl = await sys.svc.redis.pttl(sys.svc.keys.stopCut(String(argv[8])));
    expect(ttl).toBeGreaterThan(STOP_CUT_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(STOP_CUT_TTL_MS);
    await sys.svc.redis.del(sys.svc.keys.inbox(key), sys.svc.keys.inboxBytes(key));
  });

  it("stopping one run (a steer) searches a long inbox in steps and leaves the others queued", async () => {
    const key = "agent:main:subagent:one";
    const turns = await queue(key, 2 * STOP_STEP_TURNS + 10);
    const target = turns.at(-3)!;
    const before = Number(await sys.svc.redis.get(sys.svc.keys.inboxBytes(key)));
    const dropped = await sys.svc.inbox.dropRun(key, target.runId, "stopped");
    expect(dropped.map((t) => t.runId)).toEqual([target.runId]);
    expect(await sys.svc.runs.get(target.runId)).toMatchObject({ status: "killed" });
    const left = await sys.svc.redis.lrange(sys.svc.keys.inbox(key), 0, -1);
    expect(left).toEqual(turns.filter((t) => t !== target).map(serializeTurn));
    expect(Number(await sys.svc.redis.get(sys.svc.keys.inboxBytes(key)))).toBe(
      before - Buffer.byteLength(serializeTurn(target)),
    );
    await sys.svc.inbox.stoppedDone(target.runId);
  });

  it("no script call of a stop holds Redis long: 64 MiB of queued turns, one MiB-sized step each", async () => {
    const key = "agent:main:huge";
    const MiB = 1024 * 1024;
    const turns = await queue(key, 64, (i) => `${i} ${"x".repeat(MiB)}`);
    const admin = newRedis(redis.url);
    const saved = (await admin.config("GET", "slowlog-*")) as string[];
    try {
      await admin.config("SET", "slowlog-log-slower-than", "0");
      await admin.config("SET", "slowlog-max-len", "100000");
      await admin.slowlog("RESET");
      const steps: Turn[][] = [];
      const started = performance.now();
      expect(await stopSession(watched(steps), key)).toBe(turns.length);
      const took = performance.now() - started;
      // Past its first turn a step takes no more than STOP_STEP_BYTES: one such turn per step.
      for (const step of steps) expect(step.length).toBe(1);
      const entries = (await admin.slowlog("GET", 100000)) as [number, number, number, string[]][];
      // The script calls (commands a script makes are logged too, under their own names); the
      // slow log is the server's, so only this deployment's (other files share the test Redis).
      const ours = `${sys.svc.keys.stops()}:`;
      const stopCalls = entries.filter(
        ([, , , args]) => /^eval/i.test(args[0]!) && args.some((a) => a.startsWith(ours)),
      );
      expect(stopCalls.length).toBe(turns.length);
      const longestMs = Math.max(...stopCalls.map(([, , micros]) => micros)) / 1000;
      const totalMs = stopCalls.reduce((n, [, , micros]) => n + micros, 0) / 1000;
      console.log(
        `stop of 64 MiB: ${stopCalls.length} script calls, longest ${longestMs.toFixed(1)} ms, ` +
          `all ${totalMs.toFixed(0)} ms in Redis, ${took.toFixed(0)} ms in all`,
      );
      // One call for the whole inbox took about 10 ms per MiB (over 600 ms here); a step's is one MiB's.
      expect(longestMs).toBeLessThan(250);
      expect(STOP_STEP_BYTES).toBeLessThanOrEqual(MiB);
    } finally {
      for (let i = 0; i < saved.length; i += 2) await admin.config("SET", saved[i]!, saved[i + 1]!);
      admin.disconnect();
    }
    await expectKilledOnce(turns);
    await expectNothingLeftAside();
  });
});
