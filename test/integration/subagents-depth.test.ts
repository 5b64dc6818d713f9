/**
 * Sub-agents beyond one level, yield, and the deployment-wide limit: a depth-2 orchestrator can
 * spawn and its leaf cannot; nested completions stay internal; sessions_yield ends the turn and
 * the completion is the next turn; 50 spawns with maxConcurrent 4 never run more than 4 at once
 * and are all announced once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { readFile } from "node:fs/promises";
import {
  chat,
  deliveries,
  scriptAgent,
  queuesQuiet,
  tool,
  toolsConfig,
  transcript,
  textOf,
} from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

const BOSS = "agent:boss:main";
const MAIN = "agent:main:main";

describe("orchestrators, yield and maxConcurrent", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        agents: {
          defaults: { subagents: { maxConcurrent: 4, maxChildrenPerAgent: 20, archiveAfterMinutes: 0 } },
          list: [
            scriptAgent(
              "boss",
              [
                // The orchestrator's reply to its leaf's completion is its own result (it waited).
                { when: { regex: "Subagent completion event[\\s\\S]*leafy" }, reply: "ORCH-SUMMARY: leaf reported" },
                { when: { contains: COMPLETION }, reply: "NO_REPLY" },
                {
                  when: { contains: "orchestrate" },
                  tools: [{ name: "sessions_spawn", args: { task: "leaf work", label: "leafy" } }],
                  reply: "spawned {{tool.0.status}} {{tool.0.childSessionKey}}",
                },
                {
                  when: { contains: "leaf work" },
                  tools: [{ name: "sessions_spawn", args: { task: "deeper" } }],
                  reply: "leaf tried: {{tool.0.status}} {{tool.0.error}}",
                },
                {
                  when: { contains: "yield now" },
                  tools: [
                    { name: "sessions_spawn", args: { task: "tiny task" } },
                    { name: "sessions_yield", args: {} },
                    { name: "sessions_list", args: {} },
                  ],
                  reply: "UNSAID final text {{tool.0.status}}",
                },
                { when: { contains: "tiny task" }, delayMs: 300, reply: "tiny done" },
                { reply: "boss: {{text}}" },
              ],
              { default: true, subagents: { maxSpawnDepth: 2 } },
            ),
            scriptAgent("main", [
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              { when: { contains: "Subagent Task" }, delayMs: 150, reply: "worked: {{runId}}" },
              { reply: "main: {{text}}" },
            ]),
          ],
        },
      }),
    );
    await chat(sys, "boss", "1", "hello boss");
    await chat(sys, "main", "2", "hello main");
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("a depth-1 orchestrator spawns; its depth-2 leaf cannot; nested completions stay internal", async () => {
    const res = await tool(sys, "sessions_spawn", BOSS, { task: "orchestrate the work", label: "orch" });
    // Its own run ended at once ("spawned accepted …"), but its report waits for its leaf and is
    // what it answered to the leaf's completion.
    const orch = await announced(sys, res.runId);
    expect(orch.frozenResult).toBe("ORCH-SUMMARY: leaf reported");
    const child = await sys.svc.sessions.get(res.childSessionKey);
    expect(child).toMatchObject({ spawnDepth: 1, subagentRole: "orchestrator", spawnedBy: BOSS });

    const [grandKey] = await sys.svc.sessions.childKeys(res.childSessionKey);
    expect(grandKey).toMatch(/^agent:boss:subagent:/);
    const grandRunId = await registry(sys).currentRunOf(grandKey!);
    const grand = await announced(sys, grandRunId!);
    expect(await sys.svc.sessions.get(grandKey!)).toMatchObject({
      spawnDepth: 2,
      subagentRole: "leaf",
      spawnedBy: res.childSessionKey,
    });
    expect(grand.frozenResult).toContain("leaf tried: forbidden Tool sessions_spawn is not available to this session");
    await queuesQuiet(sys);

    // The leaf's completion went into the orchestrator's session, not to any chat.
    expect(await completionTurns(sys, res.childSessionKey)).toHaveLength(1);
    expect(await announceDeliveries(sys, res.childSessionKey)).toEqual([]);
    // The boss's own chat got the orchestrator's report only, once, with what the leaf led to.
    const reports = (await announceDeliveries(sys, BOSS)).filter((d) => d.message.includes(res.childSessionKey));
    expect(reports).toHaveLength(1);
    expect(reports[0].message).toContain("ORCH-SUMMARY: leaf reported");
    // tree = the requester and all its descendants (OpenClaw: direct children only): the
    // orchestrator sees its leaf, the boss sees both; the orchestrator does not see the boss.
    expect(
      (await tool(sys, "sessions_history", res.childSessionKey, { sessionKey: grandKey })).messages.length,
    ).toBeGreaterThan(0);
    expect((await tool(sys, "sessions_history", BOSS, { sessionKey: grandKey })).messages.length).toBeGreaterThan(0);
    const bossList = (await tool(sys, "sessions_list", BOSS, {})).sessions.map((s: { key: string }) => s.key);
    expect(bossList).toEqual(expect.arrayContaining([res.childSessionKey, grandKey]));
    const treeText =
      "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).";
    expect(await tool(sys, "sessions_history", res.childSessionKey, { sessionKey: BOSS })).toEqual({
      status: "forbidden",
      error: treeText,
    });
    expect(
      (await tool(sys, "sessions_list", res.childSessionKey, {})).sessions.map((s: { key: string }) => s.key).sort(),
    ).toEqual([res.childSessionKey, grandKey].sort());
    // The orchestrator has its subset of tools; session_status is not among them.
    expect((await tool(sys, "subagents", res.childSessionKey, {})).status).toBe("ok");
    expect((await tool(sys, "session_status", res.childSessionKey, {})).status).toBe("forbidden");
    expect(await tool(sys, "subagents", grandKey!, {})).toMatchObject({ status: "forbidden" });
  });

  it("sessions_yield ends the turn: no more tools, no reply; the completion is the requester's next turn", async () => {
    const r = await sys.post("/v1/inbound", {
      channel: "tg",
      chatType: "group",
      from: "3",
      groupId: "yield",
      text: "yield now",
      agentId: "boss",
    });
    const key = r.body.sessionKey as string;
    const yieldRunId = r.body.runId as string;
    // The turn is over as soon as it yielded: ok, with no reply (the runtime's text is dropped).
    expect(await sys.rpc("agent.wait", { runId: yieldRunId, timeoutMs: 10_000 })).toMatchObject({
      status: "ok",
      reply: "",
    });
    const yieldRun = (await sys.get(`/v1/runs/${yieldRunId}`)).body;
    expect(yieldRun).toMatchObject({ status: "ok", reply: "", yielded: "Turn yielded." });
    const [childKey] = await sys.svc.sessions.childKeys(key);
    const childRunId = (await registry(sys).currentRunOf(childKey!))!;
    const child = await announced(sys, childRunId);
    // It did not wait for its child: the child (300 ms of work) ended after the yield.
    expect(child.endedAt!).toBeGreaterThan(yieldRun.endedAt);

    await settle(async () => (await completionTurns(sys, key)).length === 1, {
      what: "the child's completion turn in the requester's session",
      timeoutMs: 15_000,
    });
    await queuesQuiet(sys);
    const lines = await transcript(sys, key);
    // Two tool calls only: the spawn and the yield; the sessions_list after it never ran.
    const calls = lines.filter(
      (m) =>
        m.role === "assistant" &&
        Array.isArray(m.content) &&
        (m.content as { type: string }[]).some((b) => b.type === "toolCall"),
    );
    expect(calls.map(textOf)).toEqual(["sessions_spawn", "sessions_yield"]);
    const results = lines.filter((m) => m.role === "toolResult").map((m) => JSON.parse(textOf(m)));
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ status: "accepted", childSessionKey: childKey });
    expect(results[1]).toEqual({ status: "yielded", message: "Turn yielded." });
    // The yielding turn's answer is empty and stopped as aborted (OpenClaw's shape); the
    // rule's final text is nowhere: not in the transcript, not delivered.
    const yieldAnswer = lines.find((m) => m.role === "assistant" && m.stopReason === "aborted");
    expect(yieldAnswer && textOf(yieldAnswer)).toBe("");
    expect(lines.some((m) => textOf(m).includes("UNSAID"))).toBe(false);
    const posts = await deliveries(sys, key);
    expect(posts.some((d) => String(d.message).includes("UNSAID"))).toBe(false);
    expect(posts.filter((d) => d.kind === "reply")).toEqual([]);
    expect(posts.filter((d) => d.kind === "subagent_announce")).toHaveLength(1);
    // The next user line after the yielding turn is the completion event of its child, run
    // as the session's next turn once the child had ended.
    const users = lines.filter((m) => m.role === "user");
    expect(users.map((u) => textOf(u).slice(0, 9))).toEqual(["yield now", COMPLETION.slice(0, 9)]);
    expect(textOf(users[1]!)).toContain("tiny done");
    expect(textOf(users[1]!)).toContain(childKey);
    // And the yield is noted in the transcript file as OpenClaw notes it (a hidden custom line).
    const entry = (await sys.svc.sessions.get(key))!;
    const raw = (await readFile(sys.svc.transcripts.path(entry.agentId, entry.sessionId), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(raw.filter((e) => e.type === "custom")).toEqual([
      expect.objectContaining({
        runId: yieldRunId,
        customType: "openclaw.sessions_yield",
        data: {
          message: "Turn yielded.",
          note: expect.stringContaining("[Context: The previous turn ended intentionally via sessions_yield"),
        },
      }),
    ]);
  });

  it("sessions_yield outside a running turn (HTTP) is refused as OpenClaw refuses it", async () => {
    expect(await tool(sys, "sessions_yield", BOSS, {})).toEqual({
      status: "error",
      error: "Yield not supported in this context",
    });
  });

  it("50 spawns with maxConcurrent 4: never more than 4 running at once, all announced once", async () => {
    const runIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      // maxChildrenPerAgent (20) bounds what is pending at once: wait for a free slot, not a sleep.
      const res = await settle(
        async () => {
          const r = await tool(sys, "sessions_spawn", MAIN, { task: `job ${i}` });
          return r.status === "accepted" ? r : undefined;
        },
        { what: `a free child slot to spawn job ${i}`, timeoutMs: 60_000, stepMs: 25 },
      );
      runIds.push(res.runId);
    }
    const runs = await Promise.all(runIds.map((id) => announced(sys, id, 90_000)));
    expect(runs.every((r) => r.status === "ok" && r.announce === "delivered")).toBe(true);
    await queuesQuiet(sys, 300, 60_000);

    const records = await Promise.all(runIds.map(async (id) => (await sys.get(`/v1/runs/${id}`)).body));
    const edges = records
      .flatMap(
        (r) =>
          [
            [r.startedAt, 1],
            [r.endedAt, -1],
          ] as [number, number][],
      )
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let cur = 0;
    let peak = 0;
    for (const [, d] of edges) peak = Math.max(peak, (cur += d));
    expect(peak).toBeLessThanOrEqual(4);
    expect(peak).toBeGreaterThanOrEqual(2); // they did run in parallel, not one by one

    const turns = await completionTurns(sys, MAIN);
    for (const run of runs) expect(turns.filter((m) => textOf(m).includes(run.childSessionKey))).toHaveLength(1);
    const posts = await announceDeliveries(sys, MAIN);
    expect(posts).toHaveLength(50);
    expect(new Set(posts.map((p) => p.id)).size).toBe(50);
  }, 180_000);
});
