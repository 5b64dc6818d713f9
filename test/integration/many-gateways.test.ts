/**
 * Many gateways, as operators run them: a private redis-server, two `switchboard gateway`
 * processes (no workers of their own) and three `switchboard worker` processes, all real OS
 * processes. Every run therefore executes in a worker process and is answered by whichever
 * gateway a client waits on:
 * - a `sessions_send` wait started on gateway A (POST /v1/tools/sessions_send with
 *   timeoutSeconds) gets its reply when the run finishes on a worker;
 * - gateway A killed (SIGKILL) while clients wait in `agent.wait`: they retry on gateway B and get
 *   their own results; nothing is lost or done twice.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosCluster } from "../chaos/cluster.js";
import { httpJson, readyz } from "../fixtures/runs-support.js";
import { scriptAgent, toolsConfig } from "../fixtures/tools-support.js";
import { testConfig } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";

const ALICE = "agent:alice:main";
const SLOW_MS = 2500;

let cluster: ChaosCluster;
let A: string;
let B: string;

async function rpc(base: string, method: string, params: unknown): Promise<any> {
  const r = await httpJson("POST", `${base}/v1/rpc/${method}`, params);
  if (r.status !== 200 || !r.body.ok) throw new Error(`${method} on ${base}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.result;
}

/** An inbound DM to `agentId` from `peer` (dmScope per-peer: one session per peer). */
async function inbound(
  base: string,
  agentId: string,
  peer: string,
  text: string,
): Promise<{ runId: string; sessionKey: string }> {
  const r = await httpJson("POST", `${base}/v1/inbound`, { channel: "tg", chatType: "dm", from: peer, text, agentId });
  if (r.status !== 202) throw new Error(`inbound on ${base}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

beforeAll(async () => {
  cluster = await ChaosCluster.start(
    (url) =>
      testConfig(
        toolsConfig({
          session: { dmScope: "per-peer", agentToAgent: { maxPingPongTurns: 0 } },
          tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
          agents: {
            list: [
              scriptAgent("alice", [{ reply: "alice: {{text}}" }], { default: true }),
              scriptAgent("bob", [
                { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
                { when: { contains: "slow" }, delayMs: SLOW_MS, reply: "bob slow: {{text}}" },
                { reply: "bob: {{text}}" },
              ]),
            ],
          },
        }),
        url,
      ),
    3,
  );
  [A, B] = cluster.gatewayUrls as [string, string];
  // The requester session exists (sessions_send acts as it).
  const hello = await rpc(A, "agent", { sessionKey: ALICE, message: "hello" });
  expect((await rpc(B, "agent.wait", { runId: hello.runId, timeoutMs: 15_000 })).status).toBe("ok");
}, 60_000);

afterAll(async () => {
  await cluster?.close();
}, 30_000);

describe("two gateways, three workers, one Redis", () => {
  it("a sessions_send wait on gateway A is answered when the run finishes on a worker", async () => {
    const targets = await Promise.all([1, 2, 3, 4].map((i) => inbound(B, "bob", `peer-${i}`, `hi ${i}`)));
    for (const t of targets)
      expect((await rpc(B, "agent.wait", { runId: t.runId, timeoutMs: 15_000 })).status).toBe("ok");
    const t0 = Date.now();
    const answers = await Promise.all(
      targets.map((t, i) =>
        httpJson("POST", `${A}/v1/tools/sessions_send`, {
          sessionKey: ALICE,
          args: { sessionKey: t.sessionKey, message: `slow question ${i}`, timeoutSeconds: 20 },
        }),
      ),
    );
    const elapsed = Date.now() - t0;
    answers.forEach((a, i) => {
      expect(a.status, JSON.stringify(a.body)).toBe(200);
      expect(a.body).toMatchObject({
        status: "ok",
        reply: `bob slow: slow question ${i}`,
        sessionKey: targets[i]!.sessionKey,
      });
    });
    // It really waited for the turns (they take SLOW_MS), and they ran side by side on the workers.
    expect(elapsed).toBeGreaterThanOrEqual(SLOW_MS - 50);
    expect(elapsed).toBeLessThan(4 * SLOW_MS);
    // The run records agree, whichever gateway is asked.
    for (const a of answers)
      expect((await httpJson("GET", `${B}/v1/runs/${a.body.runId}`)).body).toMatchObject({
        status: "ok",
        reply: a.body.reply,
      });
  }, 60_000);

  it("gateway A killed while clients wait in agent.wait: they retry on B and get their own results", async () => {
    const N = 8;
    const runs = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        rpc(A, "agent", { sessionKey: `agent:bob:failover-${i}`, message: `slow job ${i}` }),
      ),
    );
    const attempts: string[][] = runs.map(() => []);
    // A client that waits on A and, when A goes away mid-wait, asks B the same question.
    const waits = runs.map(async (r, i) => {
      for (const base of [A, B]) {
        attempts[i]!.push(base);
        try {
          return await rpc(base, "agent.wait", { runId: r.runId, timeoutMs: 30_000 });
        } catch (err) {
          if (base === B) throw err;
        }
      }
    });
    // Every run is executing on some worker, with its wait pending on A: now A dies.
    await settle(
      async () => {
        const states = await Promise.all(
          runs.map(async (r) => (await httpJson("GET", `${B}/v1/runs/${r.runId}`)).body.status),
        );
        return states.every((s) => s === "running");
      },
      { what: "every run running on some worker", timeoutMs: 15_000 },
    );
    const killedAt = Date.now();
    await cluster.gateways[0]!.kill9();
    expect(await readyz(A, 500)).toBe(0);

    const results = await Promise.all(waits);
    results.forEach((res, i) => {
      expect(res, `run ${i}`).toMatchObject({ runId: runs[i]!.runId, status: "ok", reply: `bob slow: slow job ${i}` });
      expect(attempts[i], `run ${i} failed over`).toEqual([A, B]);
    });
    for (const [i, r] of runs.entries()) {
      const rec = (await httpJson("GET", `${B}/v1/runs/${r.runId}`)).body;
      // Finished after A was gone: only B could have answered.
      expect(rec.endedAt, `run ${i}`).toBeGreaterThan(killedAt);
      // Exactly one turn: one user line, one reply, nothing lost or doubled.
      const history = await rpc(B, "chat.history", { sessionKey: `agent:bob:failover-${i}`, limit: 100 });
      expect(history.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
    }
  }, 90_000);
});
