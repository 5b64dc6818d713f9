/**
 * `maintenance.runRecordTtlMs`: how long run records stay in Redis (the idempotency window, and
 * most of Redis's memory: docs/concepts/limits.md) is a setting, not a fixed 7 days. What lives
 * as long as a run record (the sub-agent registry, sessions_send's late flag) follows it. The
 * setting is validated: at least 2 days (the longest run timeout) and at least
 * `storage.faultDeadlineMinutes` (a parked turn keeps its record until it is given up).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { SubagentRegistry } from "../../src/subagents/registry.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, tool, toolsConfig } from "../fixtures/tools-support.js";
import { issuesOf } from "../helpers/config-issues.js";

const DAY = 86_400_000;
const TTL_S = (3 * DAY) / 1000;
const MAIN = "agent:main:main";

describe("maintenance.runRecordTtlMs: the setting", () => {
  it("defaults to 7 days, takes another value, refuses less than 2 days or less than the fault deadline", () => {
    expect(parseConfig({}).maintenance.runRecordTtlMs).toBe(7 * DAY);
    expect(parseConfig({ maintenance: { runRecordTtlMs: 30 * DAY } }).maintenance.runRecordTtlMs).toBe(30 * DAY);
    expect(issuesOf({ maintenance: { runRecordTtlMs: DAY } })).toEqual([
      expect.stringMatching(/^maintenance\.runRecordTtlMs: /),
    ]);
    expect(issuesOf({ maintenance: { runRecordTtlMs: 1.5 } })).toHaveLength(1);
    const deadline = { storage: { faultDeadlineMinutes: 3 * 24 * 60 } };
    expect(issuesOf({ ...deadline, maintenance: { runRecordTtlMs: 2 * DAY } })).toEqual([
      expect.stringMatching(/^maintenance\.runRecordTtlMs: must be at least storage\.faultDeadlineMinutes/),
    ]);
    // Listed with the other problems when another field is invalid too (`config validate`).
    expect(issuesOf({ ...deadline, maintenance: { runRecordTtlMs: 2 * DAY }, gateway: { port: -1 } })).toEqual(
      expect.arrayContaining([expect.stringMatching(/^maintenance\.runRecordTtlMs: must be at least/)]),
    );
    expect(parseConfig({ ...deadline, maintenance: { runRecordTtlMs: 3 * DAY } }).maintenance.runRecordTtlMs).toBe(
      3 * DAY,
    );
  });
});

describe("maintenance.runRecordTtlMs: what expires by it", () => {
  let sys: TestSystem;
  const ttlOf = async (key: string) => await sys.svc.redis.ttl(key);
  /** Set by a write just now: the configured TTL, give or take the test's own seconds. */
  const expectConfigured = (ttl: number) => {
    expect(ttl).toBeLessThanOrEqual(TTL_S);
    expect(ttl).toBeGreaterThan(TTL_S - 60);
  };

  beforeAll(async () => {
    sys = await startTestSystem(
      toolsConfig({
        maintenance: { runRecordTtlMs: 3 * DAY },
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
        agents: {
          list: [
            scriptAgent("main", [{ when: { contains: "slowturn" }, delayMs: 2000, reply: "slow" }, { reply: "ok" }], {
              default: true,
            }),
          ],
        },
      }),
    );
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("a run record, queued and finished", async () => {
    const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "ttl", text: "slowturn" });
    expectConfigured(await ttlOf(sys.svc.keys.run(r.body.runId))); // written when queued
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    expectConfigured(await ttlOf(sys.svc.keys.run(r.body.runId))); // and again when finished
  });

  it("a sub-agent's registry entry and a sessions_send caller's late flag", async () => {
    await chat(sys, "main", "1", "hello");
    const spawned = await tool(sys, "sessions_spawn", MAIN, { task: "look something up" });
    expect(spawned.status).toBe("accepted");
    expectConfigured(await ttlOf(new SubagentRegistry(sys.svc.redis, sys.svc.keys).recordKey(spawned.runId)));

    // The caller stops waiting before the target's run ends: the late flag is set.
    const sent = await tool(sys, "sessions_send", MAIN, {
      sessionKey: "agent:main:ttl-target",
      message: "slowturn",
      timeoutSeconds: 1,
    });
    expect(sent.status).toBe("timeout");
    expectConfigured(await ttlOf(sys.svc.keys.a2aLate(sent.runId)));
    expect((await sys.rpc("agent.wait", { runId: sent.runId, timeoutMs: 10_000 })).status).toBe("ok");
  });
});
