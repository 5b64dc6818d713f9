/**
 * Switchboard on a real Redis Cluster (3 masters, no replicas), reached by a
 * `redis+cluster://` URL: inbound messages are answered, `agent` + `agent.wait` work, a
 * sessions_send runs its reply-back loop, and a worker process killed with SIGKILL mid-run has
 * its turn finished exactly once by another worker process. Two deployments (two prefixes) live
 * on two different masters, chosen so that neither is the node holding slot 0. Every key either
 * deployment writes carries its `{prefix}` hash tag: a key without it would be a CROSSSLOT error
 * in a script, MULTI or pipeline, and the last test checks no such key exists on any node.
 */
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hasRedisCli, startPrivateCluster, type ClusterNode, type PrivateCluster } from "../helpers/redis-cluster.js";
import {
  FAST_WORKERS,
  startTestSystem,
  writeConfigFile,
  type ChildHandle,
  type TestSystem,
} from "../helpers/system.js";
import { conversation, getRun, readTranscript, spawnWorker, timedWait } from "../fixtures/runs-support.js";
import {
  ANNOUNCE_TEXT,
  chat,
  deliveries,
  inbound,
  isInterSessionUser,
  scriptAgent,
  queuesQuiet,
  textOf,
  toolsConfig,
  transcript,
} from "../fixtures/tools-support.js";
import { settle } from "../helpers/settle.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";

const CLI_MISSING = !hasRedisCli();
// Long enough for a second worker process to be running before the first one is killed.
const SLOW_MS = 3000;

if (CLI_MISSING) {
  // Skipped on a developer machine without redis-cli; in CI (.ci/run installs it) a missing
  // redis-cli is a failure, never a silent skip.
  describe("Redis Cluster", () => {
    (process.env.CI ? it : it.skip)("needs redis-cli (apt-get install -y redis-tools): it creates the cluster", () => {
      throw new Error("redis-cli is not installed, so the Redis Cluster suite cannot run");
    });
  });
}

describe.skipIf(CLI_MISSING)("Switchboard on a Redis Cluster (3 masters)", () => {
  let cluster: PrivateCluster;
  /** Prefix → the master serving its hash tag. */
  const homes = new Map<string, ClusterNode>();
  const cleanups: (() => Promise<unknown>)[] = [];
  let chatSys: TestSystem;
  let crashSys: TestSystem;
  /** The worker process that survives the crash test; the CLI test's turns run on it. */
  let survivor: ChildHandle | undefined;

  /** The first prefix `sbc<i>` whose `{tag}` lives on `node` (deterministic for a given cluster layout). */
  async function prefixOn(node: ClusterNode): Promise<string> {
    for (let i = 0; i < 1000; i++) {
      const prefix = `sbc${i}`;
      if ((await cluster.nodeForTag(prefix)).port === node.port) return prefix;
    }
    throw new Error(`no prefix found for node ${node.port}`);
  }

  beforeAll(async () => {
    cluster = await startPrivateCluster(3);
    cleanups.push(() => cluster.cleanup());
    const [chatPrefix, crashPrefix] = [await prefixOn(cluster.nodes[1]!), await prefixOn(cluster.nodes[2]!)];
    homes.set(chatPrefix, cluster.nodes[1]!);
    homes.set(crashPrefix, cluster.nodes[2]!);

    // Deployment 1: gateway + workers in this process; alice and bob talk with sessions_send.
    chatSys = await startTestSystem(
      toolsConfig({
        redis: { url: cluster.url, prefix: chatPrefix },
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["alice", "bob"] } },
        session: { agentToAgent: { maxPingPongTurns: 2 } },
        agents: {
          list: [
            scriptAgent(
              "alice",
              [
                {
                  when: { regex: "^ask bob (.+)", provenance: "user" },
                  tools: [
                    {
                      name: "sessions_send",
                      args: { sessionKey: "agent:bob:main", message: "{{1}}", timeoutSeconds: 10 },
                    },
                  ],
                  reply: "Bob says: {{tool.0.reply}}",
                },
                { when: { step: "reply" }, reply: "Thanks, Bob." },
                { reply: "alice: {{text}}" },
              ],
              { default: true },
            ),
            scriptAgent("bob", [
              { when: { step: "announce" }, reply: "Bob: I answered Alice." },
              { when: { step: "reply" }, reply: "You are welcome." },
              { when: { provenance: "inter_session" }, reply: "plan for '{{text}}': ship Friday" },
              { reply: "bob: {{text}}" },
            ]),
          ],
        },
      }),
    );
    cleanups.push(() => chatSys.close());

    // Deployment 2: gateway only here; its workers are OS processes (started by the crash test).
    crashSys = await startTestSystem(
      {
        redis: { url: cluster.url, prefix: crashPrefix },
        session: { dmScope: "per-peer", reset: { mode: "off" } },
        workers: { ...FAST_WORKERS },
        channels: { telegram: { kind: "log" } },
        agents: {
          list: [
            scriptAgent(
              "main",
              [
                { when: { regex: "slow" }, delayMs: SLOW_MS, reply: "done: {{text}}" },
                { delayMs: 5, reply: "re: {{text}}" },
              ],
              { default: true },
            ),
          ],
        },
      },
      { gateway: true, workers: false },
    );
    cleanups.push(() => crashSys.close());
  }, 60_000);

  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
  }, 30_000);

  it("the two deployments live on two different masters, neither the one holding slot 0", () => {
    expect(chatSys.svc.redis).toBeInstanceOf(Cluster);
    const ports = [...homes.values()].map((n) => n.port);
    expect(new Set(ports).size).toBe(2);
    expect(ports).not.toContain(cluster.nodes[0]!.port);
  });

  it("/readyz is ready and /metrics counts the workers (BullMQ reads CLIENT LIST on every node)", async () => {
    const ready = await chatSys.get("/readyz");
    expect(ready.status, JSON.stringify(ready.body)).toBe(200);
    const metrics = await chatSys.get("/metrics");
    expect(metrics.status).toBe(200);
    const workers = /switchboard_run_workers\{[^}]*\} (\d+)/.exec(String(metrics.body));
    expect(Number(workers?.[1])).toBeGreaterThanOrEqual(1);
  });

  it("Bull Board's API lists the queues and the ready list (its counts read on the deployment's master)", async () => {
    const board = await chatSys.get("/admin/queues/api/queues?activeQueue=ready&status=failed&page=1&jobsPerPage=10");
    expect(board.status, JSON.stringify(board.body)).toBe(200);
    const queues = board.body.queues as { name: string; counts: Record<string, number>; hasWorkers: boolean | null }[];
    expect(queues.map((q) => q.name)).toEqual(expect.arrayContaining(["runs", "delivery", "ready"]));
    const ready = queues.find((q) => q.name === "ready")!;
    expect(ready.counts).toMatchObject({ waiting: 0, failed: 0 });
    // CLIENT LIST answers per node: on a Cluster the ready list's consumers are not listed (unknown).
    expect(ready.hasWorkers).toBeNull();
  });

  it("answers inbound messages and delivers the reply", async () => {
    const r = await inbound(chatSys, "alice", "u1", "hello there");
    const w = await chatSys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 });
    expect(w).toMatchObject({ status: "ok", reply: "alice: hello there" });
    const t = await transcript(chatSys, r.sessionKey);
    expect(t.map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "hello there"],
      ["assistant", "alice: hello there"],
    ]);
    await settle(async () => (await deliveries(chatSys, r.sessionKey)).some((d) => d.status === "delivered"), {
      what: "alice's reply delivered",
      timeoutMs: 10_000,
    });
    expect((await deliveries(chatSys, r.sessionKey)).map((d) => d.message)).toEqual(["alice: hello there"]);
  });

  it("agent + agent.wait: send-and-wait, and an idempotency key runs once", async () => {
    const first = await chatSys.rpc("agent", {
      agentId: "bob",
      sessionKey: "main",
      message: "status?",
      idempotencyKey: "k-1",
    });
    const again = await chatSys.rpc("agent", {
      agentId: "bob",
      sessionKey: "main",
      message: "status?",
      idempotencyKey: "k-1",
    });
    expect(again).toMatchObject({ runId: first.runId, duplicate: true });
    const w = await chatSys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 });
    expect(w).toMatchObject({ status: "ok", reply: "bob: status?" });
    const bobLines = (await transcript(chatSys, "agent:bob:main")).filter(
      (m) => m.role === "user" && textOf(m) === "status?",
    );
    expect(bobLines).toHaveLength(1);
  });

  it("sessions_send waits for bob's reply, then the reply-back loop and the announce step run", async () => {
    const r = await chat(chatSys, "alice", "u2", "ask bob what is the plan");
    const run = await getRun(chatSys, r.runId);
    expect(run.reply).toBe("Bob says: plan for 'what is the plan': ship Friday");
    // The flow ends with bob's announce step; then nothing is left in any queue.
    await settle(
      async () => {
        const t = await transcript(chatSys, "agent:bob:main");
        const i = t.findIndex((m) => m.role === "user" && textOf(m) === ANNOUNCE_TEXT);
        return i >= 0 && t.slice(i + 1).some((m) => m.role === "assistant");
      },
      { what: "bob's answer to the announce step", timeoutMs: 15_000 },
    );
    await queuesQuiet(chatSys);
    // maxPingPongTurns 2: alice hears bob's reply (step 1), bob hears alice's answer (step 2).
    const aliceSteps = (await transcript(chatSys, r.sessionKey)).filter(isInterSessionUser);
    expect(aliceSteps.map(textOf)).toEqual(["plan for 'what is the plan': ship Friday"]);
    const bob = await transcript(chatSys, "agent:bob:main");
    const bobSteps = bob.filter(isInterSessionUser).map(textOf);
    expect(bobSteps).toEqual(["what is the plan", "Thanks, Bob.", ANNOUNCE_TEXT]);
    expect(bob.filter((m) => m.role === "assistant").map(textOf)).toEqual(
      expect.arrayContaining([
        "plan for 'what is the plan': ship Friday",
        "You are welcome.",
        "Bob: I answered Alice.",
      ]),
    );
  });

  it("a worker process killed -9 mid-run: another worker process finishes the turn exactly once", async () => {
    const a = await spawnWorker(crashSys.config);
    cleanups.push(() => a.kill9());
    const post = async (text: string) => {
      const res = await crashSys.post("/v1/inbound", { channel: "telegram", chatType: "dm", from: "carol", text });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      return res.body as { runId: string; sessionKey: string; sessionId: string };
    };
    const slow = await post("slow job");
    await settle(async () => (await getRun(crashSys, slow.runId)).status === "running", {
      what: "the slow run running on worker A",
      timeoutMs: 15_000,
      stepMs: 25,
    });
    // Only A was up when the run started, so A holds it. Killed before B starts (a worker takes
    // seconds to start on a loaded machine, which the slow turn may not last): B joins afterwards.
    await a.kill9();
    expect(a.child.signalCode).toBe("SIGKILL");
    const b = await spawnWorker(crashSys.config);
    cleanups.push(() => b.kill9());
    const next = await post("after");
    const { result } = await timedWait(crashSys, slow.runId, 25_000);
    expect(result).toMatchObject({ status: "ok", reply: "done: slow job" });
    expect(await getRun(crashSys, slow.runId)).toMatchObject({ status: "ok", attempts: 2 });
    expect((await timedWait(crashSys, next.runId, 10_000)).result).toMatchObject({ status: "ok", reply: "re: after" });
    const [slowRec, nextRec] = await Promise.all([getRun(crashSys, slow.runId), getRun(crashSys, next.runId)]);
    expect(nextRec.startedAt!).toBeGreaterThanOrEqual(slowRec.endedAt!);

    // One user line and one reply per run, in order, each line once.
    const lines = readTranscript(crashSys.config, slow.sessionId);
    expect(conversation(lines)).toEqual([
      { role: "user", text: "slow job" },
      { role: "assistant", text: "done: slow job" },
      { role: "user", text: "after" },
      { role: "assistant", text: "re: after" },
    ]);
    const ids = lines.filter((l) => l.type === "message").map((l) => l.id);
    expect(new Set(ids).size).toBe(ids.length);
    // One delivery per run, the re-run's included.
    await settle(
      async () => (await deliveries(crashSys, slow.sessionKey)).filter((d) => d.status === "delivered").length >= 2,
      { what: "both replies delivered, the re-run's included", timeoutMs: 10_000 },
    );
    expect((await deliveries(crashSys, slow.sessionKey)).map((d) => d.message).sort()).toEqual([
      "done: slow job",
      "re: after",
    ]);
    const { keys, redis } = crashSys.svc;
    expect(await redis.llen(keys.inbox(slow.sessionKey))).toBe(0);
    expect(await redis.llen(keys.inflight(slow.sessionKey))).toBe(0);
    expect(b.child.exitCode).toBeNull();
    survivor = b;
  }, 60_000);

  it("the CLI without a gateway (direct mode) works on the cluster URL: send --wait and status", async () => {
    expect(survivor?.child.exitCode, "needs the worker left by the crash test").toBeNull();
    // Gateway port 0 in the file: nothing answers over HTTP, so the CLI talks to Redis itself.
    const file = writeConfigFile(crashSys.config);
    const env = { REDIS_URL: cluster.url, SWITCHBOARD_STATE_DIR: crashSys.config.storage.dir };
    const send = await runCli(
      ["send", "main", "from the cli", "--wait", "15", "--json", "--config", file],
      cliEnv(env),
      25_000,
    );
    expect(send.code, show(send)).toBe(0);
    expect(JSON.parse(send.stdout)).toMatchObject({
      sessionKey: "agent:main:main",
      status: "ok",
      reply: "re: from the cli",
    });
    const status = await runCli(["status", "--json", "--config", file], cliEnv(env), 25_000);
    expect(status.code, show(status)).toBe(0);
    const st = JSON.parse(status.stdout);
    expect(st).toMatchObject({
      gateway: { reachable: false },
      redis: { url: cluster.url, up: true },
      storage: { healthy: true },
    });
    expect(st.workers).toBeGreaterThanOrEqual(1);
    expect(st.sessions.map((x: { key: string }) => x.key)).toContain("agent:main:main");
  }, 30_000);

  it("every key either deployment wrote carries its hash tag and sits on its home master", async () => {
    const byNode = new Map<number, string[]>();
    for (const node of cluster.nodes) {
      const r = node.client();
      try {
        const found: string[] = [];
        let cursor = "0";
        do {
          const [next, batch] = await r.scan(cursor, "COUNT", 1000);
          cursor = next;
          found.push(...batch);
        } while (cursor !== "0");
        byNode.set(node.port, found);
      } finally {
        r.disconnect();
      }
    }
    for (const [prefix, home] of homes) {
      const own = byNode.get(home.port)!.filter((k) => k.startsWith(`{${prefix}}:`));
      // Sessions, run records, transcripts' indexes and BullMQ's queues all live there.
      expect(own.some((k) => k.startsWith(`{${prefix}}:s:`))).toBe(true);
      expect(own.some((k) => k.startsWith(`{${prefix}}:q:runs:`))).toBe(true);
    }
    // The process registry is shared by every prefix on purpose (it tells a process who else uses
    // this Redis; docs/concepts/deployment-identity.md): its own hash tag, its own slot.
    const isRegistry = (k: string) => k.startsWith("switchboard:{registry}:");
    const stray = [...byNode.values()]
      .flat()
      .filter((k) => !isRegistry(k) && ![...homes.keys()].some((p) => k.startsWith(`{${p}}:`)));
    expect(stray).toEqual([]);
    expect(byNode.get(cluster.nodes[0]!.port)!.filter((k) => !isRegistry(k))).toEqual([]);
  });
});
