/**
 * Chains of sends through sub-agents count their hops (session.agentToAgent.maxHops): a spawned
 * child's turn is one hop after its requester's turn, and the completion turn the announce puts
 * in the requester one hop after the child's. Before, both started again at hop 0, so a chain
 * of sends that went through a spawn was not bounded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { chat, scriptAgent, toolsConfig } from "../fixtures/tools-support.js";
import { announced, COMPLETION, registry } from "../fixtures/subagents-support.js";
import { announceTurnRunId } from "../../src/subagents/announce.js";
import { settle } from "../helpers/settle.js";
import { ensureSession } from "../../src/storage/ensure-session.js";
import { createToolRuntime } from "../../src/tools/tool-runtime.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      session: { agentToAgent: { maxPingPongTurns: 0, maxHops: 1 } },
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0 } },
        list: [
          scriptAgent(
            "main",
            [
              {
                when: { contains: COMPLETION },
                tools: [
                  { name: "sessions_send", args: { sessionKey: "agent:bob:main", message: "done", timeoutSeconds: 0 } },
                ],
                reply: "completion send: {{tool.0.status}}",
              },
              { reply: "NO_REPLY" },
            ],
            { default: true, subagents: { allowAgents: ["relay"] } },
          ),
          scriptAgent("relay", [
            {
              tools: [
                { name: "sessions_send", args: { sessionKey: "agent:bob:main", message: "hi bob", timeoutSeconds: 0 } },
              ],
              reply: "send: {{tool.0.status}}",
            },
          ]),
          scriptAgent("bob", [{ reply: "bob: {{text}}" }]),
        ],
      },
    }),
  );
  await chat(sys, "bob", "2", "hi");
});

afterAll(async () => {
  await sys?.close();
});

describe("hops through a spawn", () => {
  it("a child spawned at the hop limit's edge may not send on; its record carries its hop", async () => {
    const requester = "agent:main:hops";
    await ensureSession(sys.svc, requester);
    // A turn at hop 0 spawns: the child runs at hop 1, and with maxHops 1 its send is refused.
    const invoker = createToolRuntime(sys.svc).invokerFor({
      sessionKey: requester,
      agentId: "main",
      runId: randomUUID(),
      sandboxed: false,
      hop: 0,
    });
    const spawned = (await invoker.call("sessions_spawn", { task: "relay this", agentId: "relay" })) as {
      runId: string;
      childSessionKey: string;
    };
    const run = await announced(sys, spawned.runId);
    expect(run).toMatchObject({ status: "ok", hop: 1 });
    expect((await sys.svc.runs.get(spawned.runId))?.reply).toBe("send: forbidden");
    expect((await registry(sys).get(spawned.runId))?.frozenResult).toBe("send: forbidden");
    // The completion turn in the requester is one more hop on: its send is refused too.
    const completion = announceTurnRunId(spawned.childSessionKey, spawned.runId);
    const done = await settle(
      async () => {
        const r = await sys.svc.runs.get(completion);
        return r && r.status === "ok" ? r : undefined;
      },
      { what: "the completion turn in the requester finished" },
    );
    expect(done.reply).toBe("completion send: forbidden");
  });
});
