/**
 * Sub-agents end to end through the HTTP API with script runtimes on real Redis: sessions_spawn
 * answers at once, the child runs, the durable announce reaches the requester's chat and its
 * session exactly once; every refusal with its text; depth, lineage, tree visibility, timeouts,
 * fork, cleanup, tool profiles, steer and kill.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, queuesQuiet, tool, toolsConfig, transcript, textOf } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

const MAIN = "agent:main:main";
const SUBKEY = /^agent:researcher:subagent:[0-9a-f-]{36}$/;

/** A main-agent group session on `tg`, started by a person's message: `agent:main:tg:group:<id>`. */
async function groupSession(sys: TestSystem, id: string): Promise<string> {
  const r = await sys.post("/v1/inbound", {
    channel: "tg",
    chatType: "group",
    from: "7",
    groupId: id,
    text: `hi ${id}`,
    agentId: "main",
  });
  await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
  return r.body.sessionKey;
}

describe("sessions_spawn and the durable announce", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        agents: {
          defaults: { subagents: { maxChildrenPerAgent: 3, archiveAfterMinutes: 0 } },
          list: [
            scriptAgent(
              "main",
              [
                { when: { contains: COMPLETION }, reply: "NO_REPLY" },
                { when: { contains: "slowturn" }, delayMs: 2500, reply: "slow turn done" },
                {
                  when: { contains: "fork me" },
                  tools: [{ name: "sessions_spawn", args: { task: "summarise what we said", context: "fork" } }],
                  reply: "forked {{tool.0.childSessionKey}}",
                },
                { when: { contains: "Subagent Task" }, reply: "main-child: {{text}}" },
                { reply: "main: {{text}}" },
              ],
              { default: true, subagents: { allowAgents: ["researcher"] } },
            ),
            scriptAgent("researcher", [
              { when: { contains: "hang" }, delayMs: 20_000, reply: "never" },
              { when: { contains: "slowish" }, delayMs: 1500, reply: "slowish result" },
              // Still running when the next steer comes: that one is rate limited, not "finished".
              { when: { contains: "new direction" }, delayMs: 1500, reply: "researcher: {{text}}" },
              { when: { contains: "quiet" }, reply: "ANNOUNCE_SKIP" },
              { when: { contains: "boom" }, fail: "exploded" },
              { when: { contains: "Subagent Task" }, reply: "found: {{text}}", usage: { input: 12, output: 1000 } },
              { reply: "researcher: {{text}}" },
            ]),
            scriptAgent("alice", [{ reply: "alice: {{text}}" }]),
            scriptAgent("picky", [{ reply: "x" }], { subagents: { requireAgentId: true } }),
            scriptAgent("boxed", [{ reply: "boxed: {{text}}" }], { sandboxed: true }),
          ],
        },
      }),
    );
    await chat(sys, "main", "1", "hello");
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("answers accepted at once; the child runs; the announce reaches the chat and the requester once", async () => {
    const t0 = Date.now();
    const res = await tool(sys, "sessions_spawn", MAIN, {
      task: "look up the tide tables",
      agentId: "researcher",
      label: "tides",
    });
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(res).toMatchObject({ status: "accepted", mode: "run", context: "isolated" });
    expect(res.childSessionKey).toMatch(SUBKEY);
    expect(res.note).toContain("Auto-announce is push-based");

    const run = await announced(sys, res.runId);
    expect(run).toMatchObject({
      status: "ok",
      announce: "delivered",
      requesterSessionKey: MAIN,
      childSessionKey: res.childSessionKey,
      label: "tides",
    });
    expect(run.frozenResult).toContain("found: [Subagent Context] You are running as a subagent (depth 1/1).");
    await queuesQuiet(sys);

    // The child session: lineage written at creation.
    const child = await sys.svc.sessions.get(res.childSessionKey);
    expect(child).toMatchObject({
      spawnedBy: MAIN,
      parentSessionKey: MAIN,
      spawnDepth: 1,
      subagentRole: "leaf",
    });
    // The spawn's label names the run (its registry record, above), not the child session.
    expect(child?.label).toBeUndefined();
    await expect(
      sys.svc.sessions.upsert(
        res.childSessionKey,
        { agentId: "researcher", kind: child!.kind },
        { spawnedBy: "agent:main:other" },
      ),
    ).rejects.toMatchObject({ code: "lineage_immutable" });

    // Posted once to the requester's chat, normalised.
    const posts = (await announceDeliveries(sys, MAIN)).filter((d) => d.message.includes(res.childSessionKey));
    expect(posts).toHaveLength(1);
    expect(posts[0]).toMatchObject({ channel: "tg", to: "1", status: "delivered" });
    const msg: string = posts[0].message;
    expect(msg).toContain('Sub-agent "tides" completed successfully.');
    expect(msg).toContain("Status: ok");
    expect(msg).toContain("Result:\nfound: [Subagent Context]");
    expect(msg).toMatch(/Notes: task: look up the tide tables; child session kept \(cleanup: keep\)/);
    expect(msg).toMatch(
      new RegExp(
        String.raw`Stats: runtime \S+ • tokens 1\.0k \(in 12 \/ out 1\.0k\) ` +
          String.raw`• sessionKey agent:researcher:subagent:\S+ • sessionId [0-9a-f-]{36} • transcript \S+\.jsonl`,
      ),
    );

    // And once into the requester's session, as an inter-session turn from the child.
    const turns = (await completionTurns(sys, MAIN)).filter((m) => textOf(m).includes(res.childSessionKey));
    expect(turns).toHaveLength(1);
    expect(turns[0]!.provenance).toMatchObject({
      kind: "inter_session",
      sourceSessionKey: res.childSessionKey,
      sourceTool: "subagent_announce",
    });
    // The requester answered NO_REPLY: nothing else was posted for it.
    expect((await announceDeliveries(sys, MAIN)).length).toBe(
      (await sys.get(`/v1/deliveries?sessionKey=${encodeURIComponent(MAIN)}&limit=500`)).body.deliveries.filter(
        (d: any) => d.kind === "subagent_announce",
      ).length,
    );
  });

  it("a label used before, by this requester or another, spawns again; a target by it is then ambiguous", async () => {
    const first = await tool(sys, "sessions_spawn", MAIN, {
      task: "labelled one",
      agentId: "researcher",
      label: "dup",
    });
    expect(await announced(sys, first.runId)).toMatchObject({ status: "ok", label: "dup" });
    const again = await tool(sys, "sessions_spawn", MAIN, {
      task: "labelled two",
      agentId: "researcher",
      label: "dup",
    });
    expect(again).toMatchObject({ status: "accepted" });
    const other = await groupSession(sys, "dup-labels");
    const theirs = await tool(sys, "sessions_spawn", other, {
      task: "labelled three",
      agentId: "researcher",
      label: "dup",
    });
    expect(theirs).toMatchObject({ status: "accepted" });
    for (const r of [again, theirs])
      expect(await announced(sys, r.runId)).toMatchObject({ status: "ok", label: "dup" });
    for (const r of [first, again, theirs])
      expect((await sys.svc.sessions.get(r.childSessionKey))?.label).toBeUndefined();
    // Two of MAIN's runs carry it: `subagents` does not guess between them.
    const kill = await tool(sys, "subagents", MAIN, { action: "kill", target: "dup" });
    expect(kill).toMatchObject({ status: "error", error: "Ambiguous subagent label: dup" });
    expect(JSON.stringify(theirs)).not.toContain(first.childSessionKey);
  });

  it("announce job ids are deterministic and BullMQ-valid; the job is on the announce queue", async () => {
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "second lookup", agentId: "researcher" });
    await announced(sys, res.runId);
    const { announceJobId } = await import("../../src/subagents/announce.js");
    const id = announceJobId(res.childSessionKey, res.runId);
    expect(id.split(":")).toHaveLength(3);
    const job = await sys.svc.queues.announce.getJob(id);
    expect(job?.name).toBe("subagent.announce");
    expect(await job?.getState()).toBe("completed");
  });

  it("each refusal, in OpenClaw's words", async () => {
    const cases: [string, Record<string, unknown>, string, string][] = [
      [
        MAIN,
        { task: "x", channel: "tg" },
        "error",
        'sessions_spawn does not support "channel". Use "message" or "sessions_send" for channel delivery.',
      ],
      [MAIN, { task: "x", runtime: "acp" }, "error", 'runtime="acp" is not supported by Switchboard'],
      [
        MAIN,
        { task: "x", agentId: "Bad Id!" },
        "error",
        'Invalid agentId "Bad Id!". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. ' +
          "Use agents_list to discover valid targets.",
      ],
      [
        MAIN,
        { task: "x", mode: "session" },
        "error",
        'mode="session" requires thread=true so the subagent can stay bound to a thread.',
      ],
      [
        "agent:main:subagent:fake",
        { task: "x" },
        "forbidden",
        "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)",
      ],
      [
        "agent:picky:main",
        { task: "x" },
        "forbidden",
        "sessions_spawn requires explicit agentId when requireAgentId is configured. " +
          "Use agents_list to see allowed agent ids.",
      ],
      [
        "agent:alice:main",
        { task: "x", agentId: "researcher" },
        "forbidden",
        "agentId is not allowed for sessions_spawn (allowed: none)",
      ],
      [
        MAIN,
        { task: "x", agentId: "alice" },
        "forbidden",
        "agentId is not allowed for sessions_spawn (allowed: researcher)",
      ],
      [
        MAIN,
        { task: "x", sandbox: "require" },
        "forbidden",
        'sessions_spawn sandbox="require" needs a sandboxed target runtime. ' +
          'Pick a sandboxed agentId or use sandbox="inherit".',
      ],
      [MAIN, { task: "x", thinking: "galactic" }, "error", 'Invalid thinking level "galactic".'],
      [MAIN, { task: "x", model: "not a model" }, "error", 'Invalid model "not a model"'],
      [
        MAIN,
        { task: "x", thread: true },
        "error",
        "thread=true is unavailable because no channel plugin registered subagent_spawning hooks.",
      ],
      [MAIN, { task: "x", agentId: "researcher", context: "fork" }, "error", 'context="fork" requires the same agent'],
    ];
    for (const [caller, args, status, text] of cases) {
      const res = await tool(sys, "sessions_spawn", caller, args);
      expect(res.status, JSON.stringify({ args, res })).toBe(status);
      expect(res.error).toContain(text);
    }
    const sandboxed = await tool(sys, "sessions_spawn", MAIN, { task: "x" }, { sandboxed: true });
    expect(sandboxed).toMatchObject({
      status: "forbidden",
      error:
        "Sandboxed sessions cannot spawn unsandboxed subagents. " +
        "Set a sandboxed target agent or use the same agent runtime.",
    });
    const boxed = await tool(sys, "sessions_spawn", "agent:boxed:main", { task: "inside the box" });
    expect(boxed.status).toBe("accepted");
    expect((await sys.svc.sessions.get(boxed.childSessionKey))?.sandboxed).toBe(true);
  });

  it("maxChildrenPerAgent counts running children only", async () => {
    const key = "agent:main:tg:group:limits";
    const spawned = [];
    for (let i = 0; i < 3; i++)
      spawned.push(await tool(sys, "sessions_spawn", key, { task: `hang ${i}`, agentId: "researcher" }));
    expect(spawned.map((s) => s.status)).toEqual(["accepted", "accepted", "accepted"]);
    const fourth = await tool(sys, "sessions_spawn", key, { task: "one more", agentId: "researcher" });
    expect(fourth).toMatchObject({
      status: "forbidden",
      error: "sessions_spawn has reached max active children for this session (3/3)",
    });
    const killed = await tool(sys, "subagents", key, { action: "kill", target: "all" });
    expect(killed).toMatchObject({ status: "ok", killed: 3, text: "killed 3 subagent(s)." });
    for (const s of spawned) expect((await announced(sys, s.runId)).announce).toBe("suppressed");
    const again = await tool(sys, "sessions_spawn", key, { task: "after the kill", agentId: "researcher" });
    expect(again.status).toBe("accepted");
    expect((await announced(sys, again.runId)).status).toBe("ok");
  });

  it("a running child stays listed and killable however many runs came after it (it holds a slot)", async () => {
    const key = await groupSession(sys, "window");
    const keeper = await tool(sys, "sessions_spawn", key, { task: "hang on", agentId: "researcher", label: "keeper" });
    for (let i = 0; i < 3; i++) {
      const quick = await tool(sys, "sessions_spawn", key, { task: `quick ${i}`, agentId: "researcher" });
      await announced(sys, quick.runId);
    }
    // A window of the 2 newest runs still holds the running one, whatever its age.
    const listed = await registry(sys).forRequester(key, 2);
    expect(listed.map((r) => r.runId)).toContain(keeper.runId);
    expect(listed).toHaveLength(3);
    expect(await tool(sys, "subagents", key, { action: "kill", target: "keeper" })).toMatchObject({ status: "ok" });
    expect((await announced(sys, keeper.runId)).announce).toBe("suppressed");
  });

  it("/stop stops the running children and suppresses their announces: nothing reports after the stop", async () => {
    const id = "stopper";
    const key = await groupSession(sys, id);
    const children = [];
    for (let i = 0; i < 2; i++)
      children.push(await tool(sys, "sessions_spawn", key, { task: `hang ${i}`, agentId: "researcher" }));
    const stop = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "group",
      from: "7",
      groupId: id,
      text: "/stop",
      agentId: "main",
    });
    expect(stop.body).toMatchObject({ command: "stop" });
    for (const c of children) expect((await announced(sys, c.runId)).announce).toBe("suppressed");
    await queuesQuiet(sys);
    expect(await completionTurns(sys, key)).toEqual([]);
    expect(await announceDeliveries(sys, key)).toEqual([]);
  });

  it("sessions.reset stops the children silently: the new session does not open with their reports", async () => {
    const key = await groupSession(sys, "resetter");
    const child = await tool(sys, "sessions_spawn", key, { task: "hang on", agentId: "researcher" });
    const reset = await sys.rpc("sessions.reset", { key });
    expect(reset.stopped).toBeGreaterThanOrEqual(1);
    expect((await announced(sys, child.runId)).announce).toBe("suppressed");
    await queuesQuiet(sys);
    expect(await completionTurns(sys, key)).toEqual([]);
    expect(await announceDeliveries(sys, key)).toEqual([]);
  });

  it("session_status refuses a malformed model override, as sessions_spawn does", async () => {
    const key = await groupSession(sys, "model");
    expect(await tool(sys, "session_status", key, { model: "bad model id" })).toMatchObject({
      status: "error",
      error: expect.stringContaining('Invalid model "bad model id"'),
    });
    expect((await tool(sys, "session_status", key, { model: "openai/gpt-5" })).details.model).toBe("openai/gpt-5");
  });

  it("runTimeoutSeconds ends the child as timeout, and the announce says so", async () => {
    const res = await tool(sys, "sessions_spawn", MAIN, {
      task: "hang for a while",
      agentId: "researcher",
      runTimeoutSeconds: 1,
      label: "hanger",
    });
    const run = await announced(sys, res.runId);
    expect(run.status).toBe("timeout");
    expect((await sys.get(`/v1/runs/${res.runId}`)).body.status).toBe("timeout");
    const post = (await announceDeliveries(sys, MAIN)).find((d) => d.message.includes(res.childSessionKey));
    expect(post.message).toContain('Sub-agent "hanger" timed out.');
    expect(post.message).toContain("stopped after runTimeoutSeconds=1");
  });

  it("a failing child is announced as failed with the runtime's error; ANNOUNCE_SKIP stays silent", async () => {
    const bad = await tool(sys, "sessions_spawn", MAIN, { task: "boom now", agentId: "researcher" });
    expect(await announced(sys, bad.runId)).toMatchObject({ status: "error", announce: "delivered" });
    const post = (await announceDeliveries(sys, MAIN)).find((d) => d.message.includes(bad.childSessionKey));
    expect(post.message).toContain("failed: exploded");

    const quiet = await tool(sys, "sessions_spawn", MAIN, { task: "quiet please", agentId: "researcher" });
    expect(await announced(sys, quiet.runId)).toMatchObject({ status: "ok", announce: "skipped" });
    await queuesQuiet(sys);
    expect((await announceDeliveries(sys, MAIN)).some((d) => d.message.includes(quiet.childSessionKey))).toBe(false);
    expect((await completionTurns(sys, MAIN)).some((m) => textOf(m).includes(quiet.childSessionKey))).toBe(false);
  });

  it("cleanup delete removes the child after the announce (transcript archived); keep keeps it", async () => {
    const del = await tool(sys, "sessions_spawn", MAIN, {
      task: "delete me after",
      agentId: "researcher",
      cleanup: "delete",
    });
    const keep = await tool(sys, "sessions_spawn", MAIN, {
      task: "keep me after",
      agentId: "researcher",
      cleanup: "keep",
    });
    await announced(sys, del.runId);
    await announced(sys, keep.runId);
    await queuesQuiet(sys);
    expect(await sys.svc.sessions.get(del.childSessionKey)).toBeNull();
    expect(await sys.svc.sessions.get(keep.childSessionKey)).not.toBeNull();
    const post = (await announceDeliveries(sys, MAIN)).find((d) => d.message.includes(del.childSessionKey));
    expect(post.message).toContain("child session removed after this report (cleanup: delete)");
    const { readdirSync } = await import("node:fs");
    const { dirname } = await import("node:path");
    const dir = dirname(sys.svc.transcripts.path("researcher", "00000000-0000-4000-8000-000000000000"));
    expect(readdirSync(dir).some((f) => f.includes(".jsonl.deleted."))).toBe(true);
  });

  it("context fork starts the child from a copy of the requester's transcript", async () => {
    const key = "agent:main:tg:group:forky";
    await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "group",
      from: "5",
      groupId: "forky",
      text: "the secret word is marmalade",
      agentId: "main",
    });
    await settle(async () => (await transcript(sys, key)).length >= 2, {
      what: "the group message's turn in the requester's transcript",
    });
    const res = await tool(sys, "sessions_spawn", key, { task: "what was the secret?", context: "fork" });
    expect(res).toMatchObject({ status: "accepted", context: "fork" });
    await announced(sys, res.runId);
    const childLines = await transcript(sys, res.childSessionKey);
    expect(textOf(childLines[0]!)).toBe("the secret word is marmalade");
    expect(childLines.at(-1)!.role).toBe("assistant");
    expect(textOf(childLines.at(-1)!)).toContain("main-child:");
  });

  it("tree visibility: the requester sees its child; another session does not", async () => {
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "visible child" });
    await announced(sys, res.runId);
    const mine = await tool(sys, "sessions_history", MAIN, { sessionKey: res.childSessionKey });
    expect(mine.messages.length).toBeGreaterThan(0);
    const stranger = await tool(sys, "sessions_history", "agent:main:tg:group:stranger", {
      sessionKey: res.childSessionKey,
    });
    expect(stranger).toMatchObject({
      status: "forbidden",
      error: "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    const listed = await tool(sys, "sessions_list", MAIN, {});
    expect(listed.sessions.map((s: any) => s.key)).toContain(res.childSessionKey);
  });

  it("agents_list names what the caller may spawn; leaf sub-agents get no session tools", async () => {
    const list = await tool(sys, "agents_list", MAIN, {});
    expect(list).toMatchObject({ status: "ok", requester: "main", allowAny: false });
    expect(list.agents).toEqual([
      { id: "main", configured: true },
      { id: "researcher", configured: true },
    ]);
    const res = await tool(sys, "sessions_spawn", MAIN, { task: "leafy", agentId: "researcher" });
    await announced(sys, res.runId);
    for (const name of [
      "sessions_spawn",
      "subagents",
      "sessions_list",
      "sessions_send",
      "agents_list",
      "session_status",
    ]) {
      const r = await tool(sys, name, res.childSessionKey, name === "sessions_spawn" ? { task: "x" } : {});
      expect(r.status, name).toBe("forbidden");
      expect(r.error).toContain(`Tool ${name} is not available to this session`);
    }
  });

  it("/tools shows a session its effective tool list", async () => {
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "dm",
      from: "1",
      text: "/tools",
      agentId: "main",
    });
    expect(r.body).toMatchObject({
      command: "tools",
      status:
        "Tools: sessions_list, sessions_history, sessions_send, session_status, sessions_spawn, agents_list, " +
        "sessions_yield, subagents",
    });
    expect(await sys.svc.inbox.depth(MAIN)).toBe(0); // a command, not a turn
  });

  it("subagents list shows runs with status and announce state; session_status shows running ones", async () => {
    const key = await groupSession(sys, "lister");
    const slow = await tool(sys, "sessions_spawn", key, {
      task: "slowish job",
      agentId: "researcher",
      label: "slowpoke",
    });
    const status = await tool(sys, "session_status", key, {});
    expect(status.details.subagents).toEqual([expect.objectContaining({ runId: slow.runId, label: "slowpoke" })]);
    expect(status.text).toContain("Subagents: 1 running (slowpoke)");
    const during = await tool(sys, "subagents", key, {});
    expect(during).toMatchObject({ status: "ok", action: "list", total: 1, callerIsSubagent: false });
    expect(during.active[0]).toMatchObject({ index: 1, label: "slowpoke", status: "running", runtime: "subagent" });
    await announced(sys, slow.runId);
    const after = await tool(sys, "subagents", key, {});
    expect(after.active).toEqual([]);
    expect(after.recent[0]).toMatchObject({ label: "slowpoke", status: "ok", announce: "delivered", totalTokens: 0 });
    expect(await tool(sys, "subagents", key, { action: "kill", target: "slowpoke" })).toMatchObject({
      status: "done",
      text: "slowpoke is already finished.",
    });
    expect(await tool(sys, "subagents", key, { action: "kill", target: "nobody" })).toMatchObject({
      status: "error",
      error: "Unknown subagent target: nobody",
    });
    expect(await tool(sys, "subagents", key, { action: "kill", target: "7" })).toMatchObject({
      status: "error",
      error: "Invalid subagent index: 7",
    });
  });

  it("steer restarts the child with the guidance; only the new run is announced", async () => {
    const key = await groupSession(sys, "steer");
    const res = await tool(sys, "sessions_spawn", key, {
      task: "hang on this",
      agentId: "researcher",
      label: "steerable",
    });
    await settle(async () => (await sys.get(`/v1/runs/${res.runId}`)).body.status === "running", {
      what: "the steerable child running",
    });
    const long = await tool(sys, "subagents", key, { action: "steer", target: "steerable", message: "x".repeat(4001) });
    expect(long).toMatchObject({ status: "error", error: "Message too long (4001 chars, max 4000)." });
    const steered = await tool(sys, "subagents", key, {
      action: "steer",
      target: "steerable",
      message: "new direction please",
    });
    expect(steered).toMatchObject({
      status: "accepted",
      mode: "restart",
      sessionKey: res.childSessionKey,
      text: "steered steerable.",
    });
    // The window is 2 s: stretched here, so a slow machine cannot let it lapse before the next steer.
    const window = `${sys.svc.keys.base}:sa:steer:${key}:${res.childSessionKey}`;
    expect(await sys.svc.redis.pexpire(window, 60_000)).toBe(1);
    const again = await tool(sys, "subagents", key, { action: "steer", target: "steerable", message: "and again" });
    expect(again).toMatchObject({
      status: "rate_limited",
      error: "Steer rate limit exceeded. Wait a moment before sending another steer.",
    });
    expect(await announced(sys, res.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    const next = await announced(sys, steered.runId);
    expect(next).toMatchObject({
      status: "ok",
      announce: "delivered",
      frozenResult: "researcher: new direction please",
    });
    await queuesQuiet(sys);
    const turns = await completionTurns(sys, key);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("researcher: new direction please");
  });

  it("a child finishing while the requester is busy is announced once, right after that turn", async () => {
    const key = "agent:main:tg:group:busy";
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "group",
      from: "6",
      groupId: "busy",
      text: "slowturn please",
      agentId: "main",
    });
    await settle(async () => (await sys.get(`/v1/runs/${r.body.runId}`)).body.status === "running", {
      what: "the requester's slow turn running",
    });
    const res = await tool(sys, "sessions_spawn", key, { task: "quick one", agentId: "researcher" });
    // The child ends long before the requester's slow turn does; its completion waits in the inbox.
    const run = await announced(sys, res.runId);
    const slow = (await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 })) as { status: string };
    expect(slow.status).toBe("ok");
    const { announceTurnRunId } = await import("../../src/subagents/announce.js");
    const turnId = announceTurnRunId(res.childSessionKey, res.runId);
    const done = await sys.rpc("agent.wait", { runId: turnId, timeoutMs: 10_000 });
    expect(done.status).toBe("ok");
    const slowRec = (await sys.get(`/v1/runs/${r.body.runId}`)).body;
    const annRec = (await sys.get(`/v1/runs/${turnId}`)).body;
    expect(run.endedAt!).toBeLessThan(slowRec.endedAt);
    expect(annRec.startedAt).toBeGreaterThanOrEqual(slowRec.endedAt);
    expect(annRec.startedAt - slowRec.endedAt).toBeLessThan(1000);
    await queuesQuiet(sys);
    expect(await completionTurns(sys, key)).toHaveLength(1);
  });
});
