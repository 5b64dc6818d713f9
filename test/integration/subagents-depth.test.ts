/**
 * Sub-agents beyond one level, yield, and the deployment-wide limit: a depth-2 orchestrator can
 * spawn and its leaf cannot; nested completions stay internal; sessions_yield ends the turn and
 * the completion is the next turn; 50 spawns with maxConcurrent 4 never run more than 4 at once
 * and are all announced once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, until, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, settle, tool, toolsConfig, transcript, textOf } from "../fixtures/tools-support.js";
import { announceDeliveries, announced, completionTurns, COMPLETION, registry } from "../fixtures/subagents-support.js";

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
                { when: { contains: COMPLETION }, reply: "NO_REPLY" },
                { when: { contains: "orchestrate" }, tools: [{ name: "sessions_spawn", args: { task: "leaf work", label: "leafy" } }], reply: "spawned {{tool.0.status}} {{tool.0.childSessionKey}}" },
                { when: { contains: "leaf work" }, tools: [{ name: "sessions_spawn", args: { task: "deeper" } }], reply: "leaf tried: {{tool.0.status}} {{tool.0.error}}" },
                { when: { contains: "yield now" }, tools: [{ name: "sessions_spawn", args: { task: "tiny task" } }, { name: "sessions_yield", args: {} }, { name: "sessions_list", args: {} }], reply: "" },
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
    const orch = await announced(sys, res.runId);
    expect(orch.frozenResult).toMatch(/^spawned accepted agent:boss:subagent:/);
    const child = await sys.svc.sessions.get(res.childSessionKey);
    expect(child).toMatchObject({ spawnDepth: 1, subagentRole: "orchestrator", spawnedBy: BOSS });

    const [grandKey] = await sys.svc.sessions.childKeys(res.childSessionKey);
    expect(grandKey).toMatch(/^agent:boss:subagent:/);
    const grandRunId = await registry(sys).currentRunOf(grandKey!);
    const grand = await announced(sys, grandRunId!);
    expect(await sys.svc.sessions.get(grandKey!)).toMatchObject({ spawnDepth: 2, subagentRole: "leaf", spawnedBy: res.childSessionKey });
    expect(grand.frozenResult).toContain("leaf tried: forbidden Tool sessions_spawn is not available to this session");
    await settle(sys);

    // The leaf's completion went into the orchestrator's session, not to any chat.
    expect(await completionTurns(sys, res.childSessionKey)).toHaveLength(1);
    expect(await announceDeliveries(sys, res.childSessionKey)).toEqual([]);
    // The boss's own chat got the orchestrator's report only.
    expect((await announceDeliveries(sys, BOSS)).filter((d) => d.message.includes(res.childSessionKey))).toHaveLength(1);
    // tree: direct children only (as OpenClaw): the orchestrator sees its leaf, the boss does not.
    expect((await tool(sys, "sessions_history", res.childSessionKey, { sessionKey: grandKey })).messages.length).toBeGreaterThan(0);
    expect(await tool(sys, "sessions_history", BOSS, { sessionKey: grandKey })).toMatchObject({ status: "forbidden" });
    // The orchestrator has its subset of tools; session_status is not among them.
    expect((await tool(sys, "subagents", res.childSessionKey, {})).status).toBe("ok");
    expect((await tool(sys, "session_status", res.childSessionKey, {})).status).toBe("forbidden");
    expect(await tool(sys, "subagents", grandKey!, {})).toMatchObject({ status: "forbidden" });
  });

  it("sessions_yield ends the turn; the completion is the requester's next turn", async () => {
    const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "group", from: "3", groupId: "yield", text: "yield now", agentId: "boss" });
    const key = r.body.sessionKey as string;
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    await until(async () => (await completionTurns(sys, key)).length === 1, 15_000);
    await settle(sys);
    const lines = await transcript(sys, key);
    const results = lines.filter((m) => m.role === "toolResult").map((m) => JSON.parse(textOf(m)));
    expect(results[1]).toEqual({ status: "yielded", message: "Turn yielded." });
    expect(results[2]).toMatchObject({ status: "error", error: "turn yielded: Turn yielded." });
    // After the yielding turn, the next user line is the completion event of its child.
    const users = lines.filter((m) => m.role === "user");
    expect(textOf(users[users.length - 1]!)).toContain(COMPLETION);
    expect(textOf(users[users.length - 1]!)).toContain("tiny done");
    expect(users.map((u) => textOf(u).slice(0, 9))).toEqual(["yield now", COMPLETION.slice(0, 9)]);
  });

  it("50 spawns with maxConcurrent 4: never more than 4 running at once, all announced once", async () => {
    const runIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      // maxChildrenPerAgent (20) bounds what is pending at once: wait for a free slot, not a sleep.
      const res = await until(async () => {
        const r = await tool(sys, "sessions_spawn", MAIN, { task: `job ${i}` });
        return r.status === "accepted" ? r : undefined;
      }, 60_000, 25);
      runIds.push(res.runId);
    }
    const runs = await Promise.all(runIds.map((id) => announced(sys, id, 90_000)));
    expect(runs.every((r) => r.status === "ok" && r.announce === "delivered")).toBe(true);
    await settle(sys, 300, 60_000);

    const records = await Promise.all(runIds.map(async (id) => (await sys.get(`/v1/runs/${id}`)).body));
    const edges = records.flatMap((r) => [[r.startedAt, 1], [r.endedAt, -1]] as [number, number][]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
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
