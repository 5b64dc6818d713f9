import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { effectiveTools } from "../../src/subagents/tool-policy.js";
import { announceBody, formatTokens, statsLine, statusLabel } from "../../src/subagents/announce-format.js";
import { announceJobId } from "../../src/subagents/announce.js";
import { checkTargetAgent, roleAt, spawnableAgents } from "../../src/subagents/spawn-policy.js";
import { resolveTarget } from "../../src/tools/subagents-tool.js";
import type { SubagentRun } from "../../src/subagents/registry.js";

const cfg = (input: Record<string, unknown> = {}) => parseConfig(input);

describe("tool profiles", () => {
  it("full for top-level sessions; none for leaves; the orchestrator subset", () => {
    expect(effectiveTools(cfg(), {})).toHaveLength(8);
    expect(effectiveTools(cfg(), { spawnDepth: 1, subagentRole: "leaf" })).toEqual([]);
    expect(effectiveTools(cfg(), { spawnDepth: 1, subagentRole: "orchestrator" })).toEqual([
      "sessions_list",
      "sessions_history",
      "sessions_spawn",
      "sessions_yield",
      "subagents",
    ]);
  });
  it("profile, alsoAllow, deny and tools.subagents.tools; deny wins", () => {
    expect(effectiveTools(cfg({ tools: { profile: "messaging" } }), {})).toEqual([
      "sessions_list",
      "sessions_history",
      "sessions_send",
      "session_status",
    ]);
    expect(
      effectiveTools(
        cfg({ tools: { profile: "messaging", alsoAllow: ["sessions_spawn"], deny: ["sessions_send"] } }),
        {},
      ),
    ).toEqual(["sessions_list", "sessions_history", "session_status", "sessions_spawn"]);
    const c = cfg({ tools: { subagents: { tools: { alsoAllow: ["sessions_yield"], deny: ["sessions_list"] } } } });
    expect(effectiveTools(c, { spawnDepth: 2, subagentRole: "leaf" })).toEqual(["sessions_yield"]);
    expect(
      effectiveTools(
        cfg({ tools: { deny: ["sessions_yield"], subagents: { tools: { alsoAllow: ["sessions_yield"] } } } }),
        { spawnDepth: 1, subagentRole: "leaf" },
      ),
    ).toEqual([]);
  });
});

describe("spawn rules", () => {
  it("allow lists and roles", () => {
    const c = cfg({
      agents: {
        list: [
          { id: "main", subagents: { allowAgents: ["r"] } },
          { id: "r" },
          { id: "any", subagents: { allowAgents: ["*"] } },
        ],
      },
    });
    expect(checkTargetAgent(c, "main", "main")).toEqual({ ok: true });
    expect(checkTargetAgent(c, "main", "x")).toEqual({
      ok: false,
      error: "agentId is not allowed for sessions_spawn (allowed: r)",
    });
    expect(checkTargetAgent(c, "r", "main")).toEqual({
      ok: false,
      error: "agentId is not allowed for sessions_spawn (allowed: none)",
    });
    expect(spawnableAgents(c, "any").map((a) => a.id)).toEqual(["any", "main", "r"]);
    expect(roleAt(1, 1)).toBe("leaf");
    expect(roleAt(1, 2)).toBe("orchestrator");
  });
});

describe("announce format", () => {
  const run: SubagentRun = {
    runId: "r1",
    childSessionKey: "agent:a:subagent:x",
    requesterSessionKey: "agent:a:main",
    task: "t",
    cleanup: "keep",
    depth: 1,
    createdAt: 0,
    status: "ok",
    announce: "pending",
  };
  it("status labels and the stats line", () => {
    expect(statusLabel("error", "")).toBe("failed: unknown error");
    expect(statusLabel("timeout")).toBe("timed out");
    expect(formatTokens(1000)).toBe("1.0k");
    expect(statsLine({ sessionKey: "k", runtimeMs: 1200, usage: { input: 12, output: 1000 } })).toBe(
      "Stats: runtime 1.2s \u2022 tokens 1.0k (in 12 / out 1.0k) \u2022 sessionKey k",
    );
  });
  it("empty results read (no output)", () => {
    expect(announceBody({ run, status: "ok", result: "  ", requesterIsSubagent: false })).toContain(
      "Result:\n(no output)\n",
    );
  });
  it("the announce job id passes BullMQ's custom id rule", () => {
    const id = announceJobId("agent:main:subagent:0b7e", "5f2c-1");
    expect(id).toBe("announce:agent_main_subagent_0b7e:5f2c-1");
    // BullMQ accepts ':' in a custom id only as exactly three parts (the integration tests add it).
    expect(id.split(":")).toHaveLength(3);
  });
});

describe("subagents target resolution", () => {
  const mk = (runId: string, label: string | undefined, createdAt: number): SubagentRun => ({
    runId,
    childSessionKey: `agent:a:subagent:${runId}`,
    requesterSessionKey: "agent:a:main",
    task: "t",
    cleanup: "keep",
    depth: 1,
    createdAt,
    status: "running",
    announce: "pending",
    ...(label ? { label } : {}),
  });
  const runs = [mk("abc1", "Alpha", 1), mk("abd2", "alpine", 2), mk("xyz3", undefined, 3)];
  it("index, last, key, label, prefixes, and the errors", () => {
    expect(resolveTarget("2", runs)).toMatchObject({ ok: true, run: { runId: "abd2" } });
    expect(resolveTarget("last", runs)).toMatchObject({ ok: true, run: { runId: "xyz3" } });
    expect(resolveTarget("agent:a:subagent:abc1", runs)).toMatchObject({ ok: true, run: { runId: "abc1" } });
    expect(resolveTarget("ALPHA", runs)).toMatchObject({ ok: true, run: { runId: "abc1" } });
    expect(resolveTarget("alp", runs)).toEqual({ ok: false, error: "Ambiguous subagent label prefix: alp" });
    expect(resolveTarget("ab", runs)).toEqual({ ok: false, error: "Ambiguous subagent run id prefix: ab" });
    expect(resolveTarget("xy", runs)).toMatchObject({ ok: true, run: { runId: "xyz3" } });
    expect(resolveTarget("", runs)).toEqual({ ok: false, error: "Missing subagent target." });
    expect(resolveTarget("9", runs)).toEqual({ ok: false, error: "Invalid subagent index: 9" });
    expect(resolveTarget("agent:a:subagent:nope", runs)).toEqual({
      ok: false,
      error: "Unknown subagent session: agent:a:subagent:nope",
    });
    expect(resolveTarget("zzz", runs)).toEqual({ ok: false, error: "Unknown subagent target: zzz" });
  });
});
