/**
 * Graceful shutdown with real processes: SIGTERM on a `switchboard worker` finishes the turns it
 * holds within `workers.shutdownGraceMs` or hands them back (lease released, job back in the
 * queue) so another worker runs them at once, far sooner than the lease TTL; a rolling restart
 * of every worker under load loses and doubles nothing; a SIGTERM'd gateway answers its waiting
 * clients with `timeout` before it exits, and they get their result from another gateway.
 */
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput, ScriptRule } from "../../src/config/index.js";
import type { SystemOptions } from "../../src/app/system.js";
import {
  spawnSwitchboard,
  startTestSystem,
  writeConfigFile,
  type ChildHandle,
  type TestSystem,
} from "../helpers/system.js";
import {
  conversation,
  expectTranscript,
  getRun,
  httpJson,
  inbound,
  readTranscript,
  scriptConfig,
  spawnGateway,
  timedWait,
  waitRunning,
  type Inbound,
} from "../fixtures/runs-support.js";
import { metricsUrlOf, scrape, valueOf } from "../helpers/prometheus.js";
import { pace, settle } from "../helpers/settle.js";

/** Lease TTL (and BullMQ job lock): what a crashed worker's session would wait for. */
const LEASE_TTL_MS = 10_000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function deployment(
  slowMs: number,
  workers: ConfigInput["workers"] = {},
  opts: SystemOptions = { gateway: true, workers: false },
): Promise<TestSystem> {
  const sys = await startTestSystem(
    scriptConfig(
      [
        { when: { regex: "slow" }, delayMs: slowMs, reply: "done: {{text}}" },
        { delayMs: 5, reply: "re: {{text}}" },
      ],
      { workers: { lockDurationMs: LEASE_TTL_MS, stalledIntervalMs: LEASE_TTL_MS, metricsPort: 0, ...workers } },
    ),
    opts,
  );
  cleanups.push(() => sys.close());
  return sys;
}

/** A `switchboard worker` process logging warnings (its hand-backs are read from its output). */
async function worker(sys: TestSystem): Promise<ChildHandle> {
  const w = await spawnSwitchboard(["worker", "--config", writeConfigFile(sys.config)], {
    REDIS_URL: sys.config.redis.url,
    SWITCHBOARD_STATE_DIR: sys.config.storage.dir,
    LOG_LEVEL: "warn",
  });
  cleanups.push(() => w.kill9());
  return w;
}

/** How many turns a stopped worker said it handed back. */
function handedBack(p: ChildHandle): number {
  let turns = 0;
  for (const line of p.output().split("\n")) {
    if (!line.includes("handing running turns back")) continue;
    turns += Number((JSON.parse(line) as { turns?: number }).turns ?? 0);
  }
  return turns;
}

/** Send SIGTERM and wait for the exit: its code and how long it took. */
async function sigterm(p: ChildHandle): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  const exited = p.child.exitCode !== null ? Promise.resolve() : once(p.child, "exit");
  p.child.kill("SIGTERM");
  await exited;
  return { code: p.child.exitCode, ms: Date.now() - t0 };
}

/** Every job done (a drain completes just after its last turn's record is published): none failed, none left active. */
async function expectNoFailedOrStalledJobs(sys: TestSystem): Promise<void> {
  for (const q of [sys.svc.queues.runs, sys.svc.queues.delivery]) {
    await settle(async () => (await q.getJobCounts("active")).active === 0, {
      what: `no active job on the ${q.name} queue`,
      timeoutMs: 10_000,
      stepMs: 25,
    });
    expect(await q.getJobCounts("failed", "active")).toEqual({ failed: 0, active: 0 });
  }
  expect(await sys.svc.deadLetters.count()).toBe(0);
}

describe("graceful shutdown: workers", () => {
  it("a turn still running past the grace is handed back and taken over at once, not after the lease TTL", async () => {
    const sys = await deployment(5000, { shutdownGraceMs: 300 });
    const a = await worker(sys);
    const slow = await inbound(sys, "alice", "slow-1");
    await waitRunning(sys, slow.runId);
    const after = await inbound(sys, "alice", "after-1");
    const b = await worker(sys);

    const t0 = Date.now();
    const stopped = await sigterm(a);
    expect(stopped.code).toBe(0);
    expect(handedBack(a)).toBe(1);
    // Grace (300 ms) + hand-back: well under the lease TTL a crash would cost.
    expect(stopped.ms).toBeLessThan(LEASE_TTL_MS / 2);
    // Interrupted before anything was written: no half turn in the transcript.
    expect(conversation(readTranscript(sys.config, slow.sessionId))).toEqual([]);

    // B begins the handed-back turn (its second attempt) without waiting for the lease to expire.
    await settle(async () => ((await getRun(sys, slow.runId)).attempts ?? 0) >= 2, {
      what: "a worker starting the handed-back turn (attempt 2)",
      timeoutMs: LEASE_TTL_MS,
      stepMs: 20,
    });
    const handOverMs = Date.now() - t0;
    expect(handOverMs).toBeLessThan(LEASE_TTL_MS / 3);

    expect((await timedWait(sys, slow.runId, 20_000)).result).toMatchObject({ status: "ok", reply: "done: slow-1" });
    expect((await timedWait(sys, after.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after-1" });
    expect(await getRun(sys, slow.runId)).toMatchObject({ status: "ok", attempts: 2 });
    expect(await getRun(sys, after.runId)).toMatchObject({ status: "ok", attempts: 1 });
    expectTranscript(sys, slow, [
      ["slow-1", "done: slow-1"],
      ["after-1", "re: after-1"],
    ]);
    // B counted the handed-back turn as a redelivery and ran both turns (counted just after each finish).
    const m = await settle(
      async () => {
        const e = await scrape(metricsUrlOf(b));
        return valueOf(e, "switchboard_turn_duration_seconds_count") >= 2 ? e : null;
      },
      { what: "worker B's metrics counting both turns" },
    );
    expect(valueOf(m, "switchboard_redeliveries_total")).toBe(1);
    expect(valueOf(m, "switchboard_turn_duration_seconds_count", { status: "ok" })).toBe(2);
    await expectNoFailedOrStalledJobs(sys);
  }, 60_000);

  it("a turn that fits in the grace finishes on the stopping worker; the next turn goes to another", async () => {
    // The slow turn outlasts starting worker B even on a loaded machine (a process start can take
    // seconds then): A must still be running it when the signal comes, or A would rightly go on
    // to the next turn itself.
    const sys = await deployment(5000, { shutdownGraceMs: 15_000 });
    const a = await worker(sys);
    const slow = await inbound(sys, "bob", "slow-2");
    await waitRunning(sys, slow.runId);
    const next = await inbound(sys, "bob", "next-2");
    const b = await worker(sys);
    expect((await getRun(sys, slow.runId)).status).toBe("running");

    const stopped = await sigterm(a);
    expect(stopped.code).toBe(0);
    expect(handedBack(a)).toBe(0);
    // A finished its turn (once, first attempt) before exiting...
    expect(await getRun(sys, slow.runId)).toMatchObject({ status: "ok", reply: "done: slow-2", attempts: 1 });
    // ...and took no further turn: B runs the next one.
    expect((await timedWait(sys, next.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: next-2" });
    const m = await settle(
      async () => {
        const e = await scrape(metricsUrlOf(b));
        return valueOf(e, "switchboard_runs_total") >= 1 ? e : null;
      },
      { what: "worker B's metrics counting the next run" },
    );
    expect(valueOf(m, "switchboard_runs_total", { status: "ok" })).toBe(1);
    expect(valueOf(m, "switchboard_redeliveries_total")).toBe(0);
    expectTranscript(sys, slow, [
      ["slow-2", "done: slow-2"],
      ["next-2", "re: next-2"],
    ]);
    await expectNoFailedOrStalledJobs(sys);
  }, 60_000);

  it("a second signal exits at once", async () => {
    const sys = await deployment(20_000, { shutdownGraceMs: 60_000 });
    const a = await worker(sys);
    const slow = await inbound(sys, "dan", "slow-3");
    await waitRunning(sys, slow.runId);
    const exited = once(a.child, "exit");
    a.child.kill("SIGTERM");
    await settle(() => /shutting down/.test(a.output()), {
      what: "worker A logging that it is shutting down",
      timeoutMs: 5000,
      stepMs: 10,
    });
    const t0 = Date.now();
    a.child.kill("SIGTERM");
    await exited;
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(a.child.exitCode).toBe(1);
  }, 30_000);

  it("a rolling restart of every worker while messages flow loses and doubles nothing", async () => {
    // Slow turns outlast the grace: some are handed back mid-run, the rest finish in time.
    const sys = await deployment(2000, { shutdownGraceMs: 400 });
    const pool = [await worker(sys), await worker(sys), await worker(sys)];
    const senders = ["u1", "u2", "u3", "u4", "u5"];
    const sent = new Map<string, { first?: Inbound; texts: string[]; runIds: string[] }>(
      senders.map((s) => [s, { texts: [], runIds: [] }]),
    );
    let flowing = true;
    let n = 0;
    const producer = (async () => {
      while (flowing) {
        n++;
        const from = senders[n % senders.length]!;
        const text = n % 7 === 0 ? `slow ${from}-${n}` : `${from}-${n}`;
        const r = await inbound(sys, from, text);
        const s = sent.get(from)!;
        s.first ??= r;
        s.texts.push(text);
        s.runIds.push(r.runId);
        await pace(40, "a steady load while the worker stops");
      }
    })();

    let handedOver = 0;
    for (let i = 0; i < pool.length; i++) {
      // Let the current pool hold turns before taking one of its workers down.
      const seen = n;
      await settle(() => n >= seen + 10, {
        what: "10 more messages sent before stopping a worker",
        timeoutMs: 20_000,
        stepMs: 20,
      });
      const stopped = await sigterm(pool[i]!);
      expect(stopped.code).toBe(0);
      handedOver += handedBack(pool[i]!);
      pool[i] = await worker(sys);
    }
    const seen = n;
    await settle(() => n >= seen + 10, {
      what: "10 more messages sent to the last pool",
      timeoutMs: 20_000,
      stepMs: 20,
    });
    flowing = false;
    await producer;

    for (const [from, s] of sent) {
      for (const runId of s.runIds)
        expect((await timedWait(sys, runId, 30_000)).result, `${from} ${runId}`).toMatchObject({ status: "ok" });
      const replies = s.texts.map((t) => [t, t.startsWith("slow") ? `done: ${t}` : `re: ${t}`] as [string, string]);
      expectTranscript(sys, s.first!, replies);
    }
    expect(n).toBeGreaterThan(40);
    // Workers stopped mid slow turn handed them back; those runs were begun again elsewhere
    // (a second attempt) and still written once (checked above).
    const records = await Promise.all([...sent.values()].flatMap((s) => s.runIds).map((id) => getRun(sys, id)));
    const rerun = records.filter((r) => (r.attempts ?? 0) >= 2);
    // (A turn asked to hand back just as its runtime returned finishes where it is instead, and
    // one run may be handed back twice, so the two counts need not match.)
    expect(handedOver).toBeGreaterThanOrEqual(1);
    expect(rerun.length).toBeGreaterThanOrEqual(1);
    let redelivered = 0;
    for (const w of pool) redelivered += valueOf(await scrape(metricsUrlOf(w)), "switchboard_redeliveries_total");
    expect(redelivered).toBeLessThanOrEqual(rerun.length);
    await settle(
      async () => (await sys.svc.queues.delivery.getJobCounts("active", "waiting", "delayed")).active === 0,
      { what: "no active delivery job", timeoutMs: 10_000 },
    );
    await expectNoFailedOrStalledJobs(sys);
  }, 150_000);
});

describe("graceful shutdown: gateway", () => {
  it("a SIGTERM'd gateway answers waiting clients with timeout; they get the result on another gateway", async () => {
    // Workers and a second gateway in this process; gateway G is an OS process.
    const sys = await deployment(4000, {}, { gateway: true, workers: {} });
    const g = await spawnGateway(sys.config);
    cleanups.push(() => g.kill9());
    const slow = await inbound(sys, "erin", "slow-4");
    await waitRunning(sys, slow.runId);

    const channel = sys.svc.keys.runDoneChannel();
    const subscribers = async () => Number(((await sys.svc.redis.pubsub("NUMSUB", channel)) as [string, number])[1]);
    const before = await subscribers();
    const waits = [0, 1, 2].map(() => {
      const t0 = Date.now();
      return httpJson("POST", `${g.url}/v1/rpc/agent.wait`, { runId: slow.runId, timeoutMs: 30_000 }).then((r) => ({
        ...r,
        at: Date.now(),
        t0,
      }));
    });
    // G subscribes to run completions with its first wait.
    await settle(async () => (await subscribers()) > before, {
      what: "gateway G subscribed to run completions",
      timeoutMs: 10_000,
      stepMs: 20,
    });

    const t0 = Date.now();
    const exit = sigterm(g);
    const answers = await Promise.all(waits);
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body.result).toMatchObject({ runId: slow.runId, status: "timeout", runStatus: "running" });
      // Promptly: not after the 30 s the client asked for, nor after the run.
      expect(a.at - t0).toBeLessThan(2000);
    }
    const stopped = await exit;
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5000);
    // G no longer accepts anything.
    await expect(fetch(`${g.url}/healthz`)).rejects.toThrow();
    // The clients retry on the other gateway and get the result.
    expect((await timedWait(sys, slow.runId, 20_000)).result).toMatchObject({ status: "ok", reply: "done: slow-4" });
  }, 60_000);
});

describe("graceful shutdown: gateway and workers in one process (switchboard start)", () => {
  it("a closing gateway hands over its requests' waits, saying why; a turn's wait gets its reply", async () => {
    const script = (rules: ScriptRule[]) => ({ kind: "script" as const, rules });
    const sys = await startTestSystem({
      tools: {
        sessions: { visibility: "all" },
        agentToAgent: { enabled: true, allow: ["alice", "bob", "carol", "slow"] },
      },
      session: { agentToAgent: { maxPingPongTurns: 0 }, reset: { mode: "off" } },
      workers: { shutdownGraceMs: 15_000 },
      agents: {
        list: [
          {
            id: "alice",
            default: true,
            runtime: script([
              {
                when: { regex: "^ask bob (.+)", provenance: "user" },
                tools: [
                  {
                    name: "sessions_send",
                    args: { sessionKey: "agent:bob:main", message: "{{1}}", timeoutSeconds: 20 },
                  },
                ],
                reply: "Bob says: {{tool.0.reply}} [status={{tool.0.status}} error={{tool.0.error}}]",
              },
              { reply: "alice" },
            ]),
          },
          {
            id: "bob",
            runtime: script([
              { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
              { when: { provenance: "inter_session" }, delayMs: 2500, reply: "plan is ship friday" },
              { reply: "Bob here." },
            ]),
          },
          { id: "carol", runtime: script([{ reply: "carol" }]) },
          {
            id: "slow",
            runtime: script([
              { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
              { delayMs: 2500, reply: "slow: {{text}}" },
            ]),
          },
        ],
      },
    });
    cleanups.push(() => sys.close());
    const waiter = sys.svc.waiter();

    // A turn waiting in sessions_send, and three requests waiting: agent.wait, the OpenAI door, sessions_send.
    const alice = await sys.rpc("agent", { sessionKey: "agent:alice:main", message: "ask bob two" });
    const rpcWait = sys.post("/v1/rpc/agent.wait", { runId: alice.runId, timeoutMs: 30_000 });
    const openai = sys.post("/v1/chat/completions", {
      model: "slow",
      messages: [{ role: "user", content: "hi" }],
    });
    const httpSend = sys.post("/v1/tools/sessions_send", {
      sessionKey: "agent:carol:main",
      args: { sessionKey: "agent:slow:main", message: "hello", timeoutSeconds: 30 },
    });
    await settle(() => waiter.pendingWaits >= 4, { what: "four waits pending", timeoutMs: 10_000, stepMs: 10 });

    const t0 = Date.now();
    await sys.gateway!.close();
    const closeMs = Date.now() - t0;
    expect(closeMs).toBeLessThan(2000);

    const waited = await rpcWait;
    expect(waited.status).toBe(200);
    expect(waited.body.result).toMatchObject({ runId: alice.runId, status: "timeout", runStatus: "running" });
    expect(waited.body.result.error).toMatch(/gateway is shutting down: the run goes on; ask another gateway/);

    const door = await openai;
    expect(door.status).toBe(504);
    expect(door.body.error.message).toMatch(/gateway is shutting down; the run goes on: ask another gateway/);
    // Not "after 600 s": it waited a moment.
    expect(door.body.error.message).not.toMatch(/after \d+ s/);

    const sent = await httpSend;
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ status: "timeout" });
    expect(sent.body.error).toMatch(/^No reply yet: this gateway is shutting down/);
    expect(sent.body.error).not.toMatch(/within/);

    // The turn's own wait went on: its sessions_send got bob's real reply.
    const rec = await settle(
      async () => {
        const r = await sys.svc.runs.get(alice.runId);
        return r && r.status !== "running" && r.status !== "queued" ? r : null;
      },
      { what: "alice's turn finished", timeoutMs: 15_000, stepMs: 20 },
    );
    expect(rec).toMatchObject({ status: "ok", reply: "Bob says: plan is ship friday [status=ok error=]" });
    expect(Date.now() - t0).toBeGreaterThan(1000);
  }, 60_000);
});
