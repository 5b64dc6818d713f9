/**
 * subagents kill racing steer, and kill racing the announce of an orchestrator's report, on real
 * Redis with script runtimes: a kill between a steer's swap and its push ends the new run and
 * the steer does not run it; a kill that listed the run before a steer replaced it kills the run
 * the steer started (not "already finished"); a re-run of a cut-short steer whose new run was
 * killed queues nothing; a kill of an orchestrator whose report a claim has won answers
 * "already finished" and the report is announced, and a claim after a kill's suppression loses;
 * a steer cut off between its swap and its push (gateway killed -9) gives the replaced run back
 * its announce once its own run is dropped, whether the replaced run has ended or still runs.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { TestSystem } from "../helpers/system.js";
import { cleanUp, deploy, onCleanUp, runOk } from "../helpers/api.js";
import { chat, queuesQuiet, scriptAgent, tool, toolsConfig } from "../fixtures/tools-support.js";
import {
  ageIt,
  announced,
  completionTurns,
  COMPLETION,
  doomedGateway,
  isRegistration,
  orchestratorAgent,
  registry,
  textOf,
  toolCallCutOff,
} from "../fixtures/subagents-support.js";
import { pace, settle } from "../helpers/settle.js";
import { steeredRun, subagentsTool } from "../../src/tools/subagents-tool.js";
import { toolCallIds } from "../../src/tools/call-ids.js";
import type { ToolCaller } from "../../src/tools/tool-context.js";
import type { ToolDeps } from "../../src/tools/tool-deps.js";
import type { SubagentRun } from "../../src/subagents/registry.js";
import { isTerminal } from "../../src/runs/turn.js";

const MAIN = "agent:main:main";
const CALLER: ToolCaller = { sessionKey: MAIN, agentId: "main", sandboxed: false, hop: 0 };

afterEach(cleanUp);

async function deployment(subagents: Record<string, unknown> = {}, hangMs = 3000): Promise<TestSystem> {
  const sys = await deploy(
    toolsConfig({
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0, ...subagents } },
        list: [
          scriptAgent(
            "main",
            [
              { when: { contains: COMPLETION }, reply: "NO_REPLY" },
              { when: { contains: "hang" }, delayMs: hangMs, reply: "late" },
              { when: { contains: "new plan" }, delayMs: 1500, reply: "STEERED-RAN" },
              { when: { contains: "long research" }, delayMs: 10_000, reply: "LONG-RESULT" },
              { when: { contains: "research" }, delayMs: 2000, reply: "PREV-RESULT" },
              { reply: "main: {{text}}" },
            ],
            { default: true },
          ),
        ],
      },
    }),
  );
  await chat(sys, "main", "1", "hello");
  return sys;
}

/** A gate a test opens, and a signal that the gated call has been reached. */
function gate() {
  let open!: () => void;
  let reach!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const reached = new Promise<void>((r) => (reach = r));
  return { open, reach, opened, reached };
}

/** sys.svc with one of its stores' methods replaced (the rest bound to the real store). */
function svcWith(sys: TestSystem, store: "inbox" | "runs", method: string, fn: (real: any, ...a: any[]) => unknown) {
  const real = (sys.svc as any)[store];
  const wrapped = new Proxy(real, {
    get(t, p) {
      if (p === method) return (...a: unknown[]) => fn(t, ...a);
      const v = t[p];
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
  return Object.assign(Object.create(Object.getPrototypeOf(sys.svc)), sys.svc, { [store]: wrapped }) as ToolDeps;
}

async function running(sys: TestSystem, runId: string): Promise<void> {
  await settle(async () => (await sys.svc.runs.get(runId))?.status === "running", { what: `run ${runId} running` });
}

describe("subagents kill racing a steer", () => {
  it("a kill between the steer's swap and its push ends the new run, which never runs", async () => {
    const sys = await deployment({ maxChildrenPerAgent: 1 });
    const sp = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "w" });
    await running(sys, sp.runId);
    // The steer held right after its swap, at its stop of the replaced run.
    const g = gate();
    const svc = svcWith(sys, "inbox", "dropRun", async (inbox, ...a) => {
      g.reach();
      await g.opened;
      return inbox.dropRun(...a);
    });
    const steer = subagentsTool(svc, CALLER, { action: "steer", target: "w", message: "new plan" });
    await g.reached;
    const next = (await registry(sys).get((await registry(sys).get(sp.runId))!.replacedBy!))!;
    const kill = await tool(sys, "subagents", MAIN, { action: "kill", target: "w" });
    expect(kill).toMatchObject({ status: "ok", killed: 1, runId: next.runId });
    g.open();
    // The kill won: the steer says so, and queues nothing that runs.
    expect(await steer).toMatchObject({ status: "done", text: "w is already finished." });
    await pace(2500, "a steered turn queued anyway would have run and answered by now");
    const rec = await sys.svc.runs.get(next.runId);
    expect(rec === null || rec.status === "killed").toBe(true);
    expect(rec?.reply).toBeUndefined();
    expect(await registry(sys).get(next.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    // Its slot is free, and nothing runs in it.
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    expect(await completionTurns(sys, MAIN)).toEqual([]);
  }, 30_000);

  it("a kill that listed the run before a steer replaced it kills the run the steer started", async () => {
    const sys = await deployment();
    const sp = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "w" });
    await running(sys, sp.runId);
    // The kill held right after its listing read the run's record (still running then).
    const g = gate();
    let held = false;
    const svc = svcWith(sys, "runs", "get", async (runs, runId: string) => {
      const rec = await runs.get(runId);
      if (runId === sp.runId && !held) {
        held = true;
        g.reach();
        await g.opened;
      }
      return rec;
    });
    const kill = subagentsTool(svc, CALLER, { action: "kill", target: "w" });
    await g.reached;
    const steered = await tool(sys, "subagents", MAIN, { action: "steer", target: "w", message: "new plan" });
    expect(steered).toMatchObject({ status: "accepted", text: "steered w." });
    g.open();
    expect(await kill).toMatchObject({ status: "ok", killed: 1, runId: steered.runId, text: "killed 1 subagent(s)." });
    expect(await announced(sys, steered.runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    expect((await sys.svc.runs.get(steered.runId))?.reply).toBeUndefined();
    expect(await announced(sys, sp.runId)).toMatchObject({ announce: "suppressed" });
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    await queuesQuiet(sys);
    expect(await completionTurns(sys, MAIN)).toEqual([]);
  }, 30_000);

  it("a re-run of a steer cut short after its swap queues nothing once a kill ended the new run", async () => {
    const sys = await deployment();
    const sp = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "w" });
    await running(sys, sp.runId);
    const R = randomUUID();
    let seq = 0;
    const turn: ToolCaller = { ...CALLER, runId: R, nextCallSeq: () => seq++ };
    const message = "new plan";
    const prev = (await registry(sys).get(sp.runId))!;
    const runId = toolCallIds({ ...turn, nextCallSeq: () => 0 }, "subagents.steer").id(prev.childSessionKey, message);
    // The first attempt of turn R got as far as the swap, then its worker died.
    expect(await registry(sys).replace(prev, steeredRun(prev, runId, 1))).toBe("replaced");
    expect(await tool(sys, "subagents", MAIN, { action: "kill", target: "w" })).toMatchObject({
      status: "ok",
      killed: 1,
      runId,
    });
    expect(await registry(sys).get(runId)).toMatchObject({ status: "killed", announce: "suppressed" });
    const again = await subagentsTool(sys.svc, turn, { action: "steer", target: "w", message });
    expect(again).toMatchObject({ status: "done", text: "w is already finished." });
    await pace(2500, "a steered turn queued by the re-run would have run and answered by now");
    expect(await sys.svc.runs.get(runId)).toBeNull();
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
  }, 30_000);

  it.each([{ target: "c" }, { target: "all" }])(
    "a kill ($target) whose listing read the run just before a steer replaced it kills the steer's run",
    async ({ target }) => {
      // One long child holds the only run slot: c's turn stays queued, and the steer's stop ends it.
      const sys = await deployment({ maxChildrenPerAgent: 20, maxConcurrent: 1 }, 30_000);
      const blocker = await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "blocker" });
      const c = await tool(sys, "sessions_spawn", MAIN, { task: "queued c", label: "c" });
      // The kill has listed c, running and not replaced; its read of c's run record comes after a
      // steer replaced c (and ended c's queued turn), as in the concurrent test below, once in a while.
      let steer: Record<string, any> | undefined;
      let cSeenAs: string | undefined;
      const svc = svcWith(sys, "runs", "get", async (runs, runId: string) => {
        if (runId === c.runId && !steer) {
          steer = await tool(sys, "subagents", MAIN, { action: "steer", target: "c", message: "new plan" });
          // The steer's stop of c's queued turn ends it (at once, or as soon as a loaded worker gets to it).
          cSeenAs = await settle(
            async () => {
              const status = (await runs.get(runId))?.status;
              return isTerminal(status) ? status : undefined;
            },
            { what: "c's queued turn ended by the steer" },
          );
        }
        return await runs.get(runId);
      });
      const kill = await subagentsTool(svc, CALLER, { action: "kill", target });
      expect(steer).toMatchObject({ status: "accepted" });
      // The listed run had ended when the kill looked at it (the steer's stop ended its queued turn).
      expect(isTerminal(cSeenAs)).toBe(true);
      expect(kill).toMatchObject(
        target === "all" ? { status: "ok", killed: 2 } : { status: "ok", killed: 1, runId: steer!.runId },
      );
      const killedRuns = target === "all" ? [steer!.runId, blocker.runId] : [steer!.runId];
      for (const id of killedRuns) expect(await registry(sys).get(id)).toMatchObject({ suppressAnnounce: "killed" });
      expect(["killed", undefined]).toContain((await sys.svc.runs.get(steer!.runId))?.status);
    },
    60_000,
  );

  it("concurrent steer and kill over HTTP: the kill always kills, and no steered run runs", async () => {
    // One long child holds the only sub-agent run slot: every later child's turn stays queued.
    const sys = await deployment({ maxChildrenPerAgent: 20, maxConcurrent: 1 }, 30_000);
    await tool(sys, "sessions_spawn", MAIN, { task: "hang", label: "blocker" });
    const outcomes: string[] = [];
    for (let i = 0; i < 25; i++) {
      const label = `c${i}`;
      await tool(sys, "sessions_spawn", MAIN, { task: `queued ${i}`, label });
      const [s, k] = await Promise.all([
        tool(sys, "subagents", MAIN, { action: "steer", target: label, message: "new plan" }),
        (async () => {
          await pace((i * 7) % 23, "spread the kill over the steer's steps");
          return await tool(sys, "subagents", MAIN, { action: "kill", target: label });
        })(),
      ]);
      const rec = s.status === "accepted" ? await sys.svc.runs.get(s.runId) : null;
      outcomes.push(`${s.status}/${k.status}/${k.text.replace(label, "<label>")}/${rec?.status ?? "-"}`);
    }
    // Whoever came first, the child was running when the kill came: it is killed, and a steered
    // run's turn, if queued at all, was dropped.
    for (const o of outcomes) expect(o).toMatch(/^(accepted|done)\/ok\/killed 1 subagent\(s\)\.\/(killed|-)$/);
  }, 60_000);
});

describe("subagents kill of an orchestrator whose report is being announced", () => {
  it("answers already finished, and the report is announced once", async () => {
    const posts: { kind: string; message: string }[] = [];
    const server: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        posts.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        // A slow channel: the report's announce job is still on its post when the kill comes.
        setTimeout(() => {
          res.writeHead(200);
          res.end("ok");
        }, 3000);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    onCleanUp(async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    });
    const port = (server.address() as AddressInfo).port;
    const sys = await deploy(
      toolsConfig({
        channels: { hook: { kind: "webhook", url: `http://127.0.0.1:${port}/post`, timeoutMs: 10_000 } },
        agents: { defaults: { subagents: { archiveAfterMinutes: 0 } }, list: [orchestratorAgent(500)] },
      }),
    );
    const r = await sys.post("/v1/inbound", {
      channel: "hook",
      chatType: "group",
      from: "9",
      groupId: "g9",
      text: "hello",
      agentId: "main",
    });
    const requester = r.body.sessionKey as string;
    await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
    const o = await tool(sys, "sessions_spawn", requester, { task: "orchestrate", label: "orch" });
    await settle(async () => posts.some((p) => p.kind === "subagent_announce"), {
      what: "the orchestrator's report being posted",
      timeoutMs: 20_000,
    });
    // Claimed, its announce job still on the post: the registry still says deferred.
    expect(await registry(sys).get(o.runId)).toMatchObject({ announce: "deferred" });
    const kill = await tool(sys, "subagents", requester, { action: "kill", target: "orch" });
    expect(kill).toMatchObject({ status: "done", text: "orch is already finished." });
    const after = await announced(sys, o.runId);
    expect(after).toMatchObject({ announce: "delivered", frozenResult: "ORCH: saw A" });
    expect(after.suppressAnnounce).toBeUndefined();
    await queuesQuiet(sys);
    expect(await completionTurns(sys, requester)).toHaveLength(1);
    expect(posts.filter((p) => p.kind === "subagent_announce")).toHaveLength(1);
  }, 60_000);

  it("a kill and a claim of a waiting report: whichever comes first wins, never both", async () => {
    const sys = await deploy(toolsConfig({}));
    const reg = registry(sys);
    const waiting = async (): Promise<SubagentRun> => {
      const id = randomUUID();
      const run: SubagentRun = {
        runId: id,
        childSessionKey: `agent:main:subagent:${id}`,
        requesterSessionKey: MAIN,
        task: "orchestrate",
        cleanup: "keep",
        depth: 1,
        createdAt: Date.now(),
        status: "running",
        announce: "pending",
      };
      expect((await reg.register(run, 10)).result).toBe("registered");
      // Its run ended; its report waits for what it spawned (a claim deferred it).
      await reg.update(id, { announce: "deferred" });
      return (await reg.get(id))!;
    };
    // The kill first: the claim (an announce job that read the record before the kill) loses.
    const killed = await waiting();
    expect(await reg.suppressKilled(killed.runId)).toBe("suppressed");
    expect(await reg.claimAnnounce(killed, killed.runId, "1")).toEqual({ result: "suppressed", reason: "killed" });
    expect((await sys.svc.redis.hget(reg.recordKey(killed.runId), "announceClaim")) ?? undefined).toBeUndefined();
    // The claim first: the report is being announced, and the kill finds it finished.
    const claimed = await waiting();
    expect(await reg.claimAnnounce(claimed, claimed.runId, "1")).toMatchObject({ result: "claimed" });
    expect(await reg.suppressKilled(claimed.runId)).toBe("finished");
    expect((await reg.get(claimed.runId))?.suppressAnnounce).toBeUndefined();
  });
});

describe("a steer cut off between its swap and its push", () => {
  /** `task` spawned as "w" and running; then a steer of it through a gateway killed -9 right after its swap. */
  async function cutOffSteer(sys: TestSystem, task: string): Promise<{ prev: SubagentRun; next: SubagentRun }> {
    const doomed = await doomedGateway(sys);
    const sp = await tool(sys, "sessions_spawn", MAIN, { task, label: "w" });
    await running(sys, sp.runId);
    await toolCallCutOff(
      doomed,
      "subagents",
      MAIN,
      { action: "steer", target: "w", message: "narrow it" },
      isRegistration,
    );
    const prev = (await registry(sys).get(sp.runId))!;
    expect(prev).toMatchObject({ suppressAnnounce: "steer-restart" });
    const next = (await registry(sys).get(prev.replacedBy!))!;
    expect(next).toMatchObject({ replaces: prev.runId, status: "running" });
    expect(await sys.svc.runs.get(next.runId)).toBeNull();
    return { prev, next };
  }

  it("the replaced run ended, its announce suppressed: dropping the steer's run announces it", async () => {
    const sys = await deployment();
    const { prev, next } = await cutOffSteer(sys, "research");
    // Never stopped, it ran to its end; its announce, suppressed by the swap, said nothing.
    expect((await runOk(sys, prev.runId, 15_000)).reply).toBe("PREV-RESULT");
    expect(await announced(sys, prev.runId)).toMatchObject({ announce: "suppressed" });
    await queuesQuiet(sys);
    expect(await completionTurns(sys, MAIN)).toEqual([]);
    // Past the grace period, the requester's next subagents call drops the steer's run.
    await ageIt(sys, next);
    const list = await tool(sys, "subagents", MAIN, { action: "list" });
    expect(list.total).toBe(1);
    expect(list.recent[0]).toMatchObject({ runId: prev.runId, status: "ok" });
    expect(await registry(sys).get(next.runId)).toBeNull();
    expect(await announced(sys, prev.runId)).toMatchObject({ announce: "delivered", frozenResult: "PREV-RESULT" });
    await queuesQuiet(sys);
    const turns = await completionTurns(sys, MAIN);
    expect(turns).toHaveLength(1);
    expect(textOf(turns[0]!)).toContain("PREV-RESULT");
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
    expect(await registry(sys).currentRunOf(prev.childSessionKey)).toBe(prev.runId);
    // Once: the requester's next calls announce nothing more.
    await tool(sys, "subagents", MAIN, { action: "list" });
    await queuesQuiet(sys);
    expect(await completionTurns(sys, MAIN)).toHaveLength(1);
  }, 60_000);

  it("a drop and the replaced run's announce marking it suppressed: either way round, it is announced", async () => {
    const sys = await deploy(toolsConfig({}));
    const reg = registry(sys);
    const swapped = async (): Promise<{ prev: SubagentRun; next: SubagentRun }> => {
      const id = randomUUID();
      const prev: SubagentRun = {
        runId: id,
        childSessionKey: `agent:main:subagent:${id}`,
        requesterSessionKey: MAIN,
        task: "research",
        cleanup: "keep",
        depth: 1,
        createdAt: Date.now(),
        status: "running",
        announce: "pending",
      };
      expect((await reg.register(prev, 10)).result).toBe("registered");
      const next = steeredRun(prev, randomUUID(), 1);
      expect(await reg.replace(prev, next)).toBe("replaced");
      return { prev: (await reg.get(prev.runId))!, next: (await reg.get(next.runId))! };
    };
    // The drop first (after the job read the record suppressed): the job's mark is refused, and
    // it announces the run itself (announce.ts); nothing is left for a new job.
    const a = await swapped();
    expect(await reg.dropUnqueued(a.next, Date.now() + 1000)).toBe("dropped");
    expect(await reg.markSuppressed(a.prev.runId)).toBe(false);
    expect(await reg.get(a.prev.runId)).toMatchObject({ announce: "pending" });
    expect(await reg.get(a.prev.runId)).not.toHaveProperty("suppressAnnounce");
    expect(await reg.reannounceOf(a.prev.childSessionKey, a.next.runId)).toBeUndefined();
    expect(await reg.currentRunOf(a.prev.childSessionKey)).toBe(a.prev.runId);
    // The mark first: the drop gives the announce back, and names the run for a new job.
    const b = await swapped();
    expect(await reg.markSuppressed(b.prev.runId)).toBe(true);
    expect(await reg.dropUnqueued(b.next, Date.now() + 1000)).toBe("dropped-reannounce");
    expect(await reg.get(b.prev.runId)).toMatchObject({ announce: "pending" });
    expect(await reg.reannounceOf(b.prev.childSessionKey, b.next.runId)).toBe(b.prev.runId);
    expect(new Set(await sys.svc.redis.smembers(`${sys.svc.keys.base}:sa:active:${MAIN}`))).toEqual(
      new Set([a.prev.runId, b.prev.runId]),
    );
  });

  it("the replaced run still runs: dropping the steer's run gives it back its place and its announce", async () => {
    const sys = await deployment({ maxChildrenPerAgent: 1 });
    const { prev, next } = await cutOffSteer(sys, "long research");
    await ageIt(sys, next);
    const list = await tool(sys, "subagents", MAIN, { action: "list" });
    expect(list.active).toEqual([expect.objectContaining({ runId: prev.runId, status: "running" })]);
    expect(await registry(sys).get(prev.runId)).not.toHaveProperty("suppressAnnounce");
    // It holds the slot again, and is announced when it ends.
    expect(await registry(sys).activeCount(MAIN)).toBe(1);
    expect(await announced(sys, prev.runId, 20_000)).toMatchObject({
      status: "ok",
      announce: "delivered",
      frozenResult: "LONG-RESULT",
    });
    await queuesQuiet(sys);
    expect(await completionTurns(sys, MAIN)).toHaveLength(1);
    expect(await registry(sys).activeCount(MAIN)).toBe(0);
  }, 60_000);
});
