/**
 * sessions_send end to end through the HTTP API: inbound turns start the sessions, the tool is
 * called over POST /v1/tools/sessions_send (or by script agents as their own session), and the
 * outcome is read back from agent.wait, chat.history, run records and /v1/deliveries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import {
  ANNOUNCE_TEXT,
  chat,
  deliveries,
  isInterSessionUser,
  runRecordCount,
  scriptAgent,
  queuesQuiet,
  textOf,
  tool,
  toolsConfig,
  transcript,
  type Msg,
} from "../fixtures/tools-support.js";
import { quietPeriod, settle } from "../helpers/settle.js";

const ALICE = "agent:alice:main";
const BOB = "agent:bob:main";
const CAROL = "agent:carol:main";
const DAVE = "agent:dave:main";

describe("sessions_send (maxPingPongTurns 0)", () => {
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
              { when: { step: "announce" }, reply: "bob announces: done" },
              { when: { contains: "slow" }, delayMs: 1500, reply: "bob slow: {{text}}" },
              { when: { contains: "ff" }, delayMs: 600, reply: "bob ff: {{text}}" },
              { when: { contains: "boom" }, fail: "boom: {{text}}" },
              { reply: "bob: {{text}}" },
            ]),
            scriptAgent("carol", [
              { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
              { reply: "carol: {{text}}" },
            ]),
            scriptAgent("dave", [{ reply: "dave: {{text}}" }]),
          ],
        },
      }),
    );
    // Every session first hears from a person on `tg`: that is its external delivery route.
    await chat(sys, "alice", "1", "hi alice");
    await chat(sys, "bob", "99", "hi bob");
    await chat(sys, "carol", "98", "hi carol");
    await chat(sys, "dave", "97", "hi dave");
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("rejects a malformed tool request with 400 and an unknown tool too", async () => {
    const noCaller = await sys.post("/v1/tools/sessions_send", { args: { sessionKey: BOB, message: "x" } });
    expect(noCaller.status).toBe(400);
    expect(noCaller.body.error.code).toBe("invalid_request");
    const badArgs = await sys.post("/v1/tools/sessions_send", { sessionKey: ALICE, args: "nope" });
    expect(badArgs.status).toBe(400);
    const unknown = await sys.post("/v1/tools/sessions_frobnicate", { sessionKey: ALICE, args: {} });
    expect(unknown.status).toBe(400);
  });

  it("timeoutSeconds 0 answers accepted at once; the run happens later", async () => {
    const t0 = Date.now();
    const res = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "ff please", timeoutSeconds: 0 });
    const elapsed = Date.now() - t0;
    expect(res).toMatchObject({
      status: "accepted",
      sessionKey: BOB,
      delivery: { status: "pending", mode: "announce" },
    });
    expect(res.runId).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.reply).toBeUndefined();
    expect(elapsed).toBeLessThan(600); // the target sleeps 600 ms: the tool did not wait for it
    const early = await sys.get(`/v1/runs/${res.runId}`);
    expect(early.status).toBe(200);
    expect(["queued", "running"]).toContain(early.body.status);
    const waited = await sys.rpc("agent.wait", { runId: res.runId, timeoutMs: 10_000 });
    expect(waited).toMatchObject({ status: "ok", reply: "bob ff: ff please" });
  });

  it("waits and returns this run's own reply, never a stale one", async () => {
    const first = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "first question",
      timeoutSeconds: 10,
    });
    expect(first).toMatchObject({ status: "ok", reply: "bob: first question", sessionKey: BOB });
    const second = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "second question",
      timeoutSeconds: 10,
    });
    expect(second).toMatchObject({ status: "ok", reply: "bob: second question", sessionKey: BOB });
    expect(second.runId).not.toBe(first.runId);
    expect((await sys.get(`/v1/runs/${first.runId}`)).body).toMatchObject({
      status: "ok",
      reply: "bob: first question",
      sessionKey: BOB,
    });
    expect((await sys.get(`/v1/runs/${second.runId}`)).body).toMatchObject({
      status: "ok",
      reply: "bob: second question",
      sessionKey: BOB,
    });
  });

  it("the target's user line carries inter_session provenance", async () => {
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "provenance check",
      timeoutSeconds: 10,
    });
    expect(res.status).toBe("ok");
    const lines = (await transcript(sys, BOB)).filter((m) => m.role === "user" && textOf(m) === "provenance check");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.provenance).toMatchObject({
      kind: "inter_session",
      sourceSessionKey: ALICE,
      sourceTool: "sessions_send",
      sourceChannel: "tg",
    });
    // A person's message carries none.
    const human = (await transcript(sys, BOB)).find((m) => m.role === "user" && textOf(m) === "hi bob");
    expect(human?.provenance?.kind).not.toBe("inter_session");
  });

  it("timeout: the caller hears `timeout`, the run goes on, its late reply still reaches the requester", async () => {
    const t0 = Date.now();
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "slow question",
      timeoutSeconds: 1,
    });
    const elapsed = Date.now() - t0;
    expect(res).toMatchObject({ status: "timeout", sessionKey: BOB });
    expect(typeof res.error).toBe("string");
    expect(res.reply).toBeUndefined();
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(1450);
    // The run was not stopped: it finishes with its reply.
    const waited = await sys.rpc("agent.wait", { runId: res.runId, timeoutMs: 10_000 });
    expect(waited).toMatchObject({ status: "ok", reply: "bob slow: slow question" });
    // With no ping-pong the reply is handed to the requester as an inter-session user line.
    const late = await settle(
      async () => {
        const lines = (await transcript(sys, ALICE)).filter(
          (m) => isInterSessionUser(m) && textOf(m) === "bob slow: slow question",
        );
        return lines.length > 0 ? lines : undefined;
      },
      { what: "bob's late reply in alice's transcript", timeoutMs: 10_000 },
    );
    expect(late).toHaveLength(1);
    expect(late![0]!.provenance).toMatchObject({
      kind: "inter_session",
      sourceSessionKey: BOB,
      sourceTool: "sessions_send",
    });
    await queuesQuiet(sys);
    // Exactly once (a retried step must not hand it over twice).
    expect(
      (await transcript(sys, ALICE)).filter((m) => isInterSessionUser(m) && textOf(m) === "bob slow: slow question"),
    ).toHaveLength(1);
  });

  it("an on-time reply is not handed to the requester again (no ping-pong)", async () => {
    const res = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, message: "quick one", timeoutSeconds: 10 });
    expect(res.status).toBe("ok");
    await queuesQuiet(sys);
    expect(
      (await transcript(sys, ALICE)).filter((m) => isInterSessionUser(m) && textOf(m) === "bob: quick one"),
    ).toHaveLength(0);
  });

  it("error: a failing target run answers status error with its message", async () => {
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "boom goes the run",
      timeoutSeconds: 10,
    });
    expect(res.status).toBe("error");
    expect(res.error).toContain("boom");
    expect(res.reply).toBeUndefined();
    expect((await sys.get(`/v1/runs/${res.runId}`)).body).toMatchObject({ status: "error" });
  });

  it("announce: posted to the target session's own channel (from its stored delivery context)", async () => {
    await queuesQuiet(sys);
    const before = (await deliveries(sys, BOB)).filter((d) => d.kind === "announce").length;
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: BOB,
      message: "announce this",
      timeoutSeconds: 10,
    });
    expect(res.status).toBe("ok");
    await settle(async () => (await deliveries(sys, BOB)).filter((d) => d.kind === "announce").length > before, {
      what: "bob's announce delivered",
      timeoutMs: 10_000,
    });
    await queuesQuiet(sys);
    const announces = (await deliveries(sys, BOB)).filter((d) => d.kind === "announce");
    expect(announces).toHaveLength(before + 1);
    expect(announces[0]).toMatchObject({
      channel: "tg",
      to: "99",
      message: "bob announces: done",
      sessionKey: BOB,
      status: "delivered",
    });
    // Never to the requester's chat.
    expect((await deliveries(sys, ALICE)).some((d) => d.kind === "announce")).toBe(false);
    // The announce step ran in the target, as an inter-session turn.
    const bob = await transcript(sys, BOB);
    const steps = bob.filter((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT);
    expect(steps.length).toBeGreaterThanOrEqual(1);
    expect(steps.every((m) => m.provenance?.kind === "inter_session")).toBe(true);
  });

  it("announce: ANNOUNCE_SKIP posts nothing", async () => {
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: CAROL,
      message: "keep quiet",
      timeoutSeconds: 10,
    });
    expect(res).toMatchObject({ status: "ok", reply: "carol: keep quiet" });
    await settle(
      async () => {
        const c = await transcript(sys, CAROL);
        const i = c.findIndex((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT);
        return i >= 0 && c.slice(i + 1).some((m) => m.role === "assistant" && textOf(m) === "ANNOUNCE_SKIP");
      },
      { what: "carol's ANNOUNCE_SKIP answer to the announce step", timeoutMs: 10_000 },
    );
    await queuesQuiet(sys);
    const carol = await deliveries(sys, CAROL);
    expect(carol.some((d) => d.kind === "announce")).toBe(false);
    expect(carol.filter((d) => d.kind === "reply")).toHaveLength(1); // only the answer to the person's "hi carol"
  });

  it("by label (set with sessions.patch); key+label and neither are errors with OpenClaw's texts", async () => {
    await sys.rpc("sessions.patch", { key: BOB, label: "bobby" });
    const byLabel = await tool(sys, "sessions_send", ALICE, {
      label: "bobby",
      agentId: "bob",
      message: "via label",
      timeoutSeconds: 10,
    });
    expect(byLabel).toMatchObject({ status: "ok", reply: "bob: via label", sessionKey: BOB });
    // A label is looked up in the caller's agent unless agentId says otherwise.
    const ownAgent = await tool(sys, "sessions_send", ALICE, { label: "bobby", message: "x" });
    expect(ownAgent).toMatchObject({ status: "error", error: "No session found with label: bobby" });
    const both = await tool(sys, "sessions_send", ALICE, { sessionKey: BOB, label: "bobby", message: "x" });
    expect(both).toMatchObject({ status: "error", error: "Provide either sessionKey or label (not both)." });
    expect(both.runId).toMatch(/^[0-9a-f-]{36}$/);
    const neither = await tool(sys, "sessions_send", ALICE, { message: "x" });
    expect(neither).toMatchObject({ status: "error", error: "Either sessionKey or label is required" });
    expect(neither.runId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("sendPolicy deny on the target: status error (as OpenClaw answers), and no run", async () => {
    await sys.rpc("sessions.patch", { key: DAVE, sendPolicy: "deny" });
    const before = (await transcript(sys, DAVE)).length;
    const runsBefore = await runRecordCount(sys);
    const res = await tool(sys, "sessions_send", ALICE, {
      sessionKey: DAVE,
      message: "are you there",
      timeoutSeconds: 5,
    });
    expect(res).toMatchObject({ status: "error", error: "send blocked by session policy" });
    expect((await sys.get(`/v1/runs/${res.runId}`)).status).toBe(404);
    await queuesQuiet(sys);
    expect((await transcript(sys, DAVE)).length).toBe(before);
    expect(await runRecordCount(sys)).toBe(runsBefore);
  });

  it("inter-session traffic never overwrites the target's (or requester's) external route", async () => {
    await queuesQuiet(sys);
    const bob = (await sys.rpc("sessions.resolve", { key: BOB })).entry;
    expect(bob).toMatchObject({ lastChannel: "tg", lastTo: "99", deliveryContext: { channel: "tg", to: "99" } });
    const alice = (await sys.rpc("sessions.resolve", { key: ALICE })).entry;
    expect(alice).toMatchObject({ lastChannel: "tg", lastTo: "1", deliveryContext: { channel: "tg", to: "1" } });
    // Bob really did receive many inter-session turns by now.
    expect((await transcript(sys, BOB)).filter(isInterSessionUser).length).toBeGreaterThanOrEqual(8);
    // A person writing to bob's bot again still gets the answer on bob's chat.
    await chat(sys, "bob", "99", "still there?");
    await settle(
      async () =>
        (await deliveries(sys, BOB)).some(
          (d) => d.kind === "reply" && d.message === "bob: still there?" && d.to === "99",
        ),
      { what: "bob's reply to 'still there?' delivered on his chat", timeoutMs: 10_000 },
    );
  });
});

/** Reply-back loop: `req` asks `tgt`; each side answers reply steps until skipped or out of turns. */
function pingPongAgents() {
  return [
    scriptAgent(
      "req",
      [
        { when: { step: "reply", contains: "skipme" }, reply: "REPLY_SKIP" },
        { when: { step: "reply" }, reply: "req ping {{text}}" },
        { reply: "req: {{text}}" },
      ],
      { default: true },
    ),
    scriptAgent("tgt", [
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
      { when: { step: "reply", contains: "noreply" }, reply: "NO_REPLY" },
      { when: { step: "reply" }, reply: "tgt pong" },
      { when: { contains: "slow" }, delayMs: 1500, reply: "tgt slow: {{text}}" },
      { reply: "tgt: {{text}}" },
    ]),
  ];
}

describe.each([0, 2, 5])("reply-back loop with maxPingPongTurns %i", (turns) => {
  let sys: TestSystem;
  let n = 0;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
        session: { dmScope: "per-peer", agentToAgent: { maxPingPongTurns: turns } },
        agents: { list: pingPongAgents() },
      }),
    );
  });
  afterAll(async () => {
    await sys?.close();
  });

  /** A fresh requester/target pair, a send, and the finished flow's reply steps. */
  async function exchange(message: string, timeoutSeconds = 10) {
    n += 1;
    const req = (await chat(sys, "req", `r${n}`, "hello")).sessionKey;
    const tgt = (await chat(sys, "tgt", `t${n}`, "hello")).sessionKey;
    const res = await tool(sys, "sessions_send", req, { sessionKey: tgt, message, timeoutSeconds });
    // The flow always ends with the announce step in the target.
    await settle(
      async () => {
        const t = await transcript(sys, tgt);
        const i = t.findIndex((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT);
        return i >= 0 && t.slice(i + 1).some((m) => m.role === "assistant");
      },
      { what: "the target's answer to the announce step", timeoutMs: 15_000 },
    );
    await queuesQuiet(sys);
    const reqLines = (await transcript(sys, req)).filter(isInterSessionUser);
    const tgtLines = (await transcript(sys, tgt)).filter(isInterSessionUser);
    // Target: the message itself + its reply steps + the announce step.
    expect(textOf(tgtLines[0]!)).toBe(message);
    expect(textOf(tgtLines.at(-1)!)).toBe(ANNOUNCE_TEXT);
    const tgtReplySteps = tgtLines.slice(1, -1);
    for (const m of reqLines)
      expect(m.provenance).toMatchObject({ sourceSessionKey: tgt, sourceTool: "sessions_send" });
    for (const m of tgtLines)
      expect(m.provenance).toMatchObject({ sourceSessionKey: req, sourceTool: "sessions_send" });
    return { res, req, tgt, reqLines, tgtReplySteps, steps: reqLines.length + tgtReplySteps.length };
  }

  it(`runs exactly ${turns} reply steps, alternating and starting with the requester`, async () => {
    const x = await exchange("how are you");
    expect(x.res).toMatchObject({ status: "ok", reply: "tgt: how are you" });
    expect(x.steps).toBe(turns);
    expect(x.reqLines).toHaveLength(Math.ceil(turns / 2));
    expect(x.tgtReplySteps).toHaveLength(Math.floor(turns / 2));
    if (turns > 0) expect(textOf(x.reqLines[0]!)).toBe("tgt: how are you");
    if (turns > 1) expect(textOf(x.tgtReplySteps[0]!)).toBe("req ping tgt: how are you");
    if (turns > 2) expect(textOf(x.reqLines[1]!)).toBe("tgt pong");
  });

  it("REPLY_SKIP stops the loop at once", async () => {
    const x = await exchange("skipme please");
    expect(x.res.status).toBe("ok");
    expect(x.steps).toBe(Math.min(turns, 1));
    if (turns > 0) {
      const req = await transcript(sys, x.req);
      expect(req.filter((m) => m.role === "assistant").map(textOf)).toContain("REPLY_SKIP");
    }
  });

  it("NO_REPLY stops the loop too", async () => {
    const x = await exchange("noreply please");
    expect(x.res.status).toBe("ok");
    expect(x.steps).toBe(Math.min(turns, 2));
    if (turns >= 2) {
      const tgt = await transcript(sys, x.tgt);
      expect(tgt.filter((m) => m.role === "assistant").map(textOf)).toContain("NO_REPLY");
    }
  });

  it("a caller without a stored session (an HTTP client) still gets the announce step, no reply steps", async () => {
    n += 1;
    const tgt = (await chat(sys, "tgt", `t${n}`, "hello")).sessionKey;
    const ghost = `agent:req:ghost-${n}`;
    const res = await tool(sys, "sessions_send", ghost, {
      sessionKey: tgt,
      message: "from nowhere",
      timeoutSeconds: 10,
    });
    expect(res).toMatchObject({ status: "ok", reply: "tgt: from nowhere" });
    await settle(
      async () => {
        const t = await transcript(sys, tgt);
        const i = t.findIndex((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT);
        return i >= 0 && t.slice(i + 1).some((m) => m.role === "assistant");
      },
      { what: "the target's answer to the announce step", timeoutMs: 10_000 },
    );
    await queuesQuiet(sys);
    const lines = (await transcript(sys, tgt)).filter(isInterSessionUser).map(textOf);
    expect(lines).toEqual(["from nowhere", ANNOUNCE_TEXT]);
  });

  it("a reply that comes after the caller's timeout still reaches the requester, exactly once", async () => {
    const x = await exchange("slow answer", 1);
    expect(x.res.status).toBe("timeout");
    const late = x.reqLines.filter((m) => textOf(m) === "tgt slow: slow answer");
    expect(late).toHaveLength(1); // through the loop when there is one, else handed over directly
    expect(x.steps).toBe(turns === 0 ? 1 : turns);
    expect(x.reqLines).toHaveLength(Math.max(Math.ceil(turns / 2), 1));
  });
});

describe("agent-to-agent chains are bounded by session.agentToAgent.maxHops", () => {
  const relay = (to: string, steps?: "turn") => [
    {
      when: { provenance: "inter_session" as const, ...(steps ? { step: steps } : {}) },
      tools: [
        {
          name: "sessions_send",
          args: { sessionKey: `agent:${to}:main`, message: "relay from {{agentId}}", timeoutSeconds: 0 },
        },
      ],
      reply: "relayed {{tool.0.status}} {{tool.0.error}}",
    },
    { when: { step: "reply" as const }, reply: "REPLY_SKIP" },
    { when: { step: "announce" as const }, reply: "ANNOUNCE_SKIP" },
    { reply: "ok" },
  ];

  async function loopSystem(steps: "turn" | undefined, turns: number) {
    const sys = await startTestSystem(
      toolsConfig({
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
        session: { agentToAgent: { maxPingPongTurns: turns, maxHops: 4 } },
        agents: {
          list: [
            scriptAgent("a", relay("b", steps), { default: true }),
            scriptAgent("b", relay("c", steps)),
            scriptAgent("c", relay("a", steps)),
          ],
        },
      }),
    );
    for (const [id, from] of [
      ["a", "1"],
      ["b", "2"],
      ["c", "3"],
    ] as const)
      await chat(sys, id, from, "hello");
    return sys;
  }

  async function toolResults(sys: TestSystem): Promise<{ key: string; result: any }[]> {
    const out: { key: string; result: any }[] = [];
    for (const key of ["agent:a:main", "agent:b:main", "agent:c:main"]) {
      for (const m of await transcript(sys, key))
        if (m.role === "toolResult") out.push({ key, result: JSON.parse(textOf(m)) });
    }
    return out;
  }

  it("A→B→C→A relaying every inter-session turn stops after maxHops sends (exact count)", async () => {
    const sys = await loopSystem("turn", 5);
    try {
      const runsBefore = await runRecordCount(sys);
      const kick = await tool(sys, "sessions_send", "agent:a:main", {
        sessionKey: "agent:b:main",
        message: "start the chain",
        timeoutSeconds: 0,
      });
      expect(kick.status).toBe("accepted");
      await settle(async () => (await toolResults(sys)).some((t) => t.result.status === "forbidden"), {
        what: "the send past maxHops refused (forbidden)",
        timeoutMs: 15_000,
      });
      await queuesQuiet(sys, 600);
      const results = await toolResults(sys);
      // hop 1 B→C, hop 2 C→A, hop 3 A→B accepted; the 4th relay (B at hop 4) is refused.
      expect(results.map((t) => [t.key, t.result.status])).toEqual([
        ["agent:a:main", "accepted"],
        ["agent:b:main", "accepted"],
        ["agent:b:main", "forbidden"],
        ["agent:c:main", "accepted"],
      ]);
      const refused = results.find((t) => t.result.status === "forbidden")!;
      expect(refused.result.error).toMatch(/hop limit/i);
      // 4 accepted sends: 4 target turns + 4 announce steps + a REPLY_SKIP reply step for the
      // three sends whose hop left room for one (hops 1–3; hop 4 is at the bound).
      expect((await runRecordCount(sys)) - runsBefore).toBe(4 + 4 + 3);
    } finally {
      await sys.close();
    }
  });

  it("relaying on every inter-session message (reply and announce steps too) still terminates", async () => {
    const sys = await loopSystem(undefined, 5);
    try {
      const runsBefore = await runRecordCount(sys);
      await tool(sys, "sessions_send", "agent:a:main", {
        sessionKey: "agent:b:main",
        message: "start the storm",
        timeoutSeconds: 0,
      });
      await settle(async () => (await toolResults(sys)).some((t) => t.result.status === "forbidden"), {
        what: "the send past maxHops refused (forbidden)",
        timeoutMs: 15_000,
      });
      await queuesQuiet(sys, 800, 30_000);
      const runs = (await runRecordCount(sys)) - runsBefore;
      // Without the bound this never stops: every run relays, and every accepted send makes a
      // target turn, reply steps and an announce step, each relaying again. With maxHops 4, a
      // send accepted at hop h makes runs at hops h..4 plus an announce (6 − h runs), and each
      // of its runs below hop 4 relays once more: N(4)=2, N(3)=3+N(4)=5, N(2)=4+N(3)+N(4)=11,
      // N(1)=5+N(2)+N(3)+N(4)=23.
      expect(runs).toBe(23);
      const results = await toolResults(sys);
      expect(results.some((t) => t.result.status === "forbidden" && /hop limit/i.test(t.result.error))).toBe(true);
      await quietPeriod(500, "nothing is still going on a moment later: no further run");
      expect((await runRecordCount(sys)) - runsBefore).toBe(runs);
      const userLines = (await Promise.all(["a", "b", "c"].map((id) => transcript(sys, `agent:${id}:main`))))
        .flat()
        .filter((m: Msg) => m.role === "user");
      expect(userLines.length).toBe(3 + runs); // one user line per run, plus the three "hello"s
    } finally {
      await sys.close();
    }
  });
});
