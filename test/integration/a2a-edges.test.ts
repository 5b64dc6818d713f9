/**
 * Edges of sessions_send and the run record, each a bug reproduced in review:
 *  - a session sending to itself from inside its own turn (it cannot wait for a turn queued
 *    behind the one waiting), and never an announce echo of a self-send (OpenClaw #122709);
 *  - a cron requester never gets reply-back turns nor a late reply (OpenClaw #92257 / PR #93826);
 *  - `agent` with `deliver: true` and no route records a `no_route` delivery, never drops it;
 *  - a run record shows `reply` only when the run is `ok` (not given up, not still running);
 *  - fire-and-forget with zero ping-pong turns and a skipped announce hands the reply to nobody
 *    (as documented), while a wait that timed out still gets its late reply.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import {
  ANNOUNCE_TEXT,
  chat,
  deliveries,
  inbound,
  isInterSessionUser,
  scriptAgent,
  textOf,
  tool,
  toolsConfig,
  transcript,
} from "../fixtures/tools-support.js";
import { quietPeriod, settle } from "../helpers/settle.js";
import { HolderWriter } from "../../src/transcript/holder-writer.js";

const ALICE = "agent:alice:main";
const BOB = "agent:bob:main";

describe("sessions_send edges: self-sends and cron requesters", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
        session: { agentToAgent: { maxPingPongTurns: 3 } },
        agents: {
          list: [
            scriptAgent(
              "alice",
              [
                {
                  when: { contains: "selfsend" },
                  tools: [
                    {
                      name: "sessions_send",
                      args: { sessionKey: "current", message: "note to self", timeoutSeconds: 5 },
                    },
                  ],
                  reply: "self {{tool.0.status}} {{tool.0.runId}}",
                },
                {
                  when: { contains: "cronjob" },
                  tools: [
                    {
                      name: "sessions_send",
                      args: { sessionKey: BOB, message: "report {{text}}", timeoutSeconds: 0 },
                    },
                  ],
                  reply: "cron sent {{tool.0.runId}}",
                },
                {
                  when: { contains: "cronwait" },
                  tools: [
                    { name: "sessions_send", args: { sessionKey: BOB, message: "slow report", timeoutSeconds: 1 } },
                  ],
                  reply: "cron waited {{tool.0.status}} {{tool.0.runId}}",
                },
                // Every other turn (reply-back and announce steps too) answers: an echo would show.
                { reply: "alice: {{text}}" },
              ],
              { default: true },
            ),
            scriptAgent("bob", [
              { when: { step: "announce" }, reply: "bob announces" },
              { when: { contains: "slow" }, delayMs: 1500, reply: "bob slow: {{text}}" },
              { reply: "bob: {{text}}" },
            ]),
          ],
        },
      }),
    );
    await chat(sys, "alice", "1", "hi alice");
    await chat(sys, "bob", "2", "hi bob");
  });
  afterAll(async () => {
    await sys?.close();
  });

  const announceLines = async (key: string) =>
    (await transcript(sys, key)).filter((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT).length;
  const announceDeliveries = async (key: string) =>
    (await deliveries(sys, key)).filter((d) => d.kind === "announce").length;

  it("a self-send from inside a turn is accepted at once, runs after the turn, and announces nothing", async () => {
    const t0 = Date.now();
    const turn = await inbound(sys, "alice", "1", "selfsend please");
    const done = await sys.rpc("agent.wait", { runId: turn.runId, timeoutMs: 15_000 });
    const elapsed = Date.now() - t0;
    expect(done.status).toBe("ok");
    // Not a 5 s timeout waiting for a turn queued behind this very one.
    expect(done.reply).toMatch(/^self accepted [0-9a-f-]{36}$/);
    expect(elapsed).toBeLessThan(4000);
    const selfRunId = done.reply.split(" ")[2];
    const selfRun = await sys.rpc("agent.wait", { runId: selfRunId, timeoutMs: 10_000 });
    expect(selfRun).toMatchObject({ status: "ok", reply: "alice: note to self" });
    await quietPeriod(600, "an announce step of the self-send would have run and posted by now");
    const lines = await transcript(sys, ALICE);
    const note = lines.filter((m) => isInterSessionUser(m) && textOf(m) === "note to self");
    expect(note).toHaveLength(1);
    expect(await announceLines(ALICE)).toBe(0);
    expect(await announceDeliveries(ALICE)).toBe(0);
  });

  it("a self-send from outside a turn (timeoutSeconds 0 or waited) posts no announce echo", async () => {
    const ff = await tool(sys, "sessions_send", ALICE, {
      sessionKey: ALICE,
      message: "fire and forget to me",
      timeoutSeconds: 0,
    });
    expect(ff.status).toBe("accepted");
    const waited = await tool(sys, "sessions_send", ALICE, {
      sessionKey: ALICE,
      message: "wait for me",
      timeoutSeconds: 10,
    });
    expect(waited).toMatchObject({ status: "ok", reply: "alice: wait for me" });
    expect((await sys.rpc("agent.wait", { runId: ff.runId, timeoutMs: 10_000 })).status).toBe("ok");
    await quietPeriod(600, "an announce step of either self-send would have run and posted by now");
    expect(await announceLines(ALICE)).toBe(0);
    expect(await announceDeliveries(ALICE)).toBe(0);
    // Nothing is pending for a self-send: no `delivery: { status: "pending", mode: "announce" }`.
    expect(ff.delivery).toBeUndefined();
    expect(waited.delivery).toBeUndefined();
  });

  for (const isolated of [false, true]) {
    const requester = isolated ? "isolated run" : "job session";
    it(`a cron requester (${requester}) gets no reply-back turns; the target still announces`, async () => {
      const announcedBefore = await announceLines(BOB);
      const job = isolated ? "cron:nightly-iso" : "cron:nightly";
      const run = await sys.rpc("agent", {
        sessionKey: job,
        agentId: "alice",
        message: `cronjob ${job}`,
        ...(isolated ? { sessionTarget: "isolated" } : {}),
      });
      expect(run.sessionKey).toBe(`agent:alice:${job}`);
      const done = await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 });
      expect(done.reply).toMatch(/^cron sent [0-9a-f-]{36}$/);
      const sendRun = await sys.rpc("agent.wait", { runId: done.reply.split(" ")[2], timeoutMs: 10_000 });
      expect(sendRun).toMatchObject({ status: "ok", reply: `bob: report cronjob ${job}` });
      // The announce step runs in the target as for any requester.
      await settle(async () => (await announceLines(BOB)) > announcedBefore, { what: "bob's announce step" });
      await quietPeriod(600, "a reply-back turn in the cron session would have been queued and run by now");
      const cron = await transcript(sys, run.sessionKey);
      expect(cron.filter(isInterSessionUser)).toEqual([]);
      expect(cron.map(textOf)).toEqual([`cronjob ${job}`, "sessions_send", expect.any(String), done.reply]);
    });
  }

  it("a cron requester whose wait timed out is not handed the late reply", async () => {
    const run = await sys.rpc("agent", { sessionKey: "cron:waiter", agentId: "alice", message: "cronwait" });
    const done = await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 });
    expect(done.reply).toMatch(/^cron waited timeout [0-9a-f-]{36}$/);
    const late = await sys.rpc("agent.wait", { runId: done.reply.split(" ")[3], timeoutMs: 10_000 });
    expect(late).toMatchObject({ status: "ok", reply: "bob slow: slow report" });
    await quietPeriod(600, "a late reply turn in the cron session would have been queued and run by now");
    const cron = await transcript(sys, run.sessionKey);
    expect(cron.filter(isInterSessionUser)).toEqual([]);
    const toolResult = JSON.parse(textOf(cron[2]!));
    expect(toolResult.error).toMatch(/the run continues\.$/);
  });

  it("agent with deliver:true on a session without a route records a no_route delivery of its reply", async () => {
    const key = "agent:alice:nowhere";
    const run = await sys.rpc("agent", { sessionKey: key, message: "deliver me", deliver: true });
    expect((await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 })).status).toBe("ok");
    const d = await settle(async () => (await deliveries(sys, key)).find((x) => x.status !== "pending"), {
      what: "the reply's delivery record",
      timeoutMs: 5000,
    });
    expect(d).toMatchObject({ kind: "reply", status: "no_route", message: "alice: deliver me", sessionKey: key });
    // Without deliver nothing is recorded, as before.
    const quiet = await sys.rpc("agent", { sessionKey: "agent:alice:elsewhere", message: "keep me" });
    expect((await sys.rpc("agent.wait", { runId: quiet.runId, timeoutMs: 10_000 })).status).toBe("ok");
    await quietPeriod(300, "a delivery of a run without deliver would have been recorded by now");
    expect(await deliveries(sys, "agent:alice:elsewhere")).toEqual([]);
  });
});

/**
 * Transcript writes of texts containing "eio" fail with EIO while `failing` is set: the turn's
 * outcome is saved on its record and the turn parked (or given up, with no deadline).
 */
let failing = false;
const originalWrite = HolderWriter.prototype.write;
function failEioWrites(): void {
  HolderWriter.prototype.write = async function (this: HolderWriter, agentId, sessionId, entries, opts) {
    const hit = entries.some((e) => JSON.stringify((e as { message?: unknown }).message ?? "").includes("eio"));
    if (failing && hit) {
      const err = Object.assign(new Error("EIO: i/o error, write"), { code: "EIO", syscall: "write" });
      throw err;
    }
    return await originalWrite.call(this, agentId, sessionId, entries, opts);
  };
}

describe("run records show a reply only on ok runs", () => {
  const systems: TestSystem[] = [];
  beforeAll(() => failEioWrites());
  afterAll(async () => {
    HolderWriter.prototype.write = originalWrite;
    for (const s of systems) await s.close();
  });

  const start = async (faultDeadlineMinutes: number) => {
    const s = await startTestSystem(
      toolsConfig({
        storage: { faultDeadlineMinutes, faultRetryMaxDelayMs: 200 },
        agents: { list: [scriptAgent("main", [{ reply: "re: {{text}}" }], { default: true })] },
      }),
    );
    systems.push(s);
    return s;
  };

  it("a run given up as an error after its result was saved has no reply (GET /v1/runs, agent.wait)", async () => {
    const sys = await start(0);
    failing = true;
    const run = await sys.rpc("agent", { sessionKey: "main", message: "eio given up" });
    const waited = await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 });
    expect(waited.status).toBe("error");
    expect(waited.reply).toBeUndefined();
    const rec = (await sys.get(`/v1/runs/${run.runId}`)).body;
    expect(rec).toMatchObject({ status: "error", resultSaved: true, resultStatus: "ok" });
    expect(rec.reply).toBeUndefined();
    failing = false;
    // An ok run still shows its reply.
    const ok = await sys.rpc("agent", { sessionKey: "main", message: "fine" });
    expect(await sys.rpc("agent.wait", { runId: ok.runId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "re: fine",
    });
    expect((await sys.get(`/v1/runs/${ok.runId}`)).body).toMatchObject({ status: "ok", reply: "re: fine" });
  });

  it("a parked run with a saved result shows no reply until it finishes ok with it", async () => {
    const sys = await start(60);
    failing = true;
    const run = await sys.rpc("agent", { sessionKey: "main", message: "eio parked" });
    const parked = await settle(
      async () => {
        const body = (await sys.get(`/v1/runs/${run.runId}`)).body;
        return body.resultSaved ? body : null;
      },
      { what: "the parked run's saved result" },
    );
    expect(["queued", "running"]).toContain(parked.status);
    expect(parked.reply).toBeUndefined();
    const early = await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 200 });
    expect(early.status).toBe("timeout");
    expect(early.reply).toBeUndefined();
    failing = false;
    // The worker that takes the parked turn up again still finishes it with the saved reply.
    expect(await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 15_000 })).toMatchObject({
      status: "ok",
      reply: "re: eio parked",
    });
    expect((await sys.get(`/v1/runs/${run.runId}`)).body).toMatchObject({ status: "ok", reply: "re: eio parked" });
  });
});

describe("sessions_send with maxPingPongTurns 0 to a target that answers ANNOUNCE_SKIP", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
        session: { agentToAgent: { maxPingPongTurns: 0 } },
        agents: {
          list: [
            scriptAgent("alice", [{ reply: "alice: {{text}}" }], { default: true }),
            scriptAgent("bob", [
              { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
              { when: { contains: "slow" }, delayMs: 1500, reply: "bob slow: {{text}}" },
              { reply: "bob: {{text}}" },
            ]),
          ],
        },
      }),
    );
    await chat(sys, "alice", "1", "hi alice");
    await chat(sys, "bob", "2", "hi bob");
  });
  afterAll(async () => {
    await sys?.close();
  });

  const announceDeliveries = async (key: string) =>
    (await deliveries(sys, key)).filter((d) => d.kind === "announce").length;

  it("fire-and-forget: the reply stays in the target's run record; no requester turn, no post", async () => {
    const ff = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "ping", timeoutSeconds: 0 });
    expect(ff.status).toBe("accepted");
    expect(await sys.rpc("agent.wait", { runId: ff.runId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "bob: ping",
    });
    // The announce step ran in bob and chose silence.
    await settle(
      async () => (await transcript(sys, BOB)).some((m) => m.role === "assistant" && textOf(m) === "ANNOUNCE_SKIP"),
      { what: "bob's announce step" },
    );
    await quietPeriod(600, "a reply turn in alice would have been queued and run by now");
    expect((await transcript(sys, ALICE)).filter(isInterSessionUser)).toEqual([]);
    expect(await announceDeliveries(BOB)).toBe(0);
    expect((await sys.get(`/v1/runs/${ff.runId}`)).body).toMatchObject({ status: "ok", reply: "bob: ping" });
  });

  it("a wait that timed out still gets the late reply, even with zero ping-pong turns", async () => {
    const waited = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "slow one", timeoutSeconds: 1 });
    expect(waited.status).toBe("timeout");
    const late = await settle(
      async () =>
        (await transcript(sys, ALICE)).find((m) => isInterSessionUser(m) && textOf(m) === "bob slow: slow one"),
      { what: "the late reply in alice" },
    );
    expect(late.provenance?.sourceSessionKey).toBe(BOB);
    expect(await announceDeliveries(BOB)).toBe(0);
  });
});
