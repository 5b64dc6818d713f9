/**
 * A session deleted (sessions.delete, pruning under session.maintenance.maxEntries) between a
 * door's read of it and the push of its turn: the push, checked on the turn's sessionId, refuses
 * a session with no entry, and the door queues the turn in the session created again. Before,
 * the turn ran in the deleted sessionId: after that sessionId's `.deleted` archive it wrote a new
 * live `<sid>.jsonl` that no entry named and nothing archived or pruned again, and the exchange
 * was in no session's history. The window is widened by holding the gateway's push until the
 * delete and its archive ran.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cleanUp, deploy, inbound, runOk, sessionFiles, sessionsDir, userTexts } from "../helpers/api.js";
import type { TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { scriptConfig } from "../fixtures/runs-support.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";

afterAll(cleanUp);

type Push = (...a: unknown[]) => Promise<unknown>;

/** Run `meanwhile` before this gateway's next push goes out (once), then let it go. */
function beforeNextPush(sys: TestSystem, meanwhile: () => Promise<void>): () => void {
  const inbox = sys.svc.inbox as unknown as { push: Push };
  const realPush = inbox.push.bind(inbox);
  let held = false;
  inbox.push = async (...a: unknown[]) => {
    if (!held) {
      held = true;
      await meanwhile();
    }
    return await realPush(...a);
  };
  return () => {
    inbox.push = realPush;
  };
}

async function archivedAsDeleted(sys: TestSystem, sessionId: string): Promise<void> {
  await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${sessionId}.jsonl.deleted.`)), {
    what: "the deleted transcript archived",
  });
}

/** The delete's archive of `sessionId` done (its pending record cleared), a transcript or none. */
async function archiveDone(sys: TestSystem, sessionId: string): Promise<void> {
  await settle(
    async () => {
      const pending = await sys.svc.redis.zrange(sys.svc.keys.pendingArchives(), 0, -1);
      return !pending.some((m) => m.split("\n")[2] === sessionId);
    },
    { what: "the delete's archive done" },
  );
}

describe("a delete landing between a door's read and its push", () => {
  it("inbound: the message runs in the session created again, no live transcript of the deleted one", async () => {
    const sys = await deploy(scriptConfig([{ reply: "echo: {{text}}" }]));
    const msg = (text: string) => ({ channel: "telegram", chatType: "dm", from: "alice", text });
    const first = await inbound(sys, msg("first"));
    await runOk(sys, first.runId);
    const s0 = first.sessionId;
    const key = first.sessionKey;

    const release = beforeNextPush(sys, async () => {
      await sys.rpc("sessions.delete", { key });
      await archivedAsDeleted(sys, s0);
    });
    const second = await inbound(sys, msg("second"));
    release();
    expect((await runOk(sys, second.runId)).reply).toBe("echo: second");

    expect(second.sessionId).not.toBe(s0);
    expect((await sys.svc.sessions.get(key))?.sessionId).toBe(second.sessionId);
    expect(existsSync(join(sessionsDir(sys), `${s0}.jsonl`))).toBe(false);
    expect(await userTexts(sys, key)).toEqual(["second"]);
  });

  it("the OpenAI door, its session pruned (maxEntries): answered in a new session, once per key", async () => {
    const sys = await deploy({
      session: { reset: { mode: "off" }, maintenance: { mode: "enforce", pruneAfter: "30d", maxEntries: 1 } },
      maintenance: { sweepEveryMs: 3_600_000 },
      agents: {
        list: [{ id: "main", default: true, runtime: { kind: "script", rules: [{ reply: "re: {{text}}" }] } }],
      },
    });
    const auth = { authorization: `Bearer ${sys.config.gateway.auth.token}` };
    const ask = async (user: string, content: string, key?: string) =>
      await sys.post(
        "/v1/chat/completions",
        { model: "main", user, messages: [{ role: "user", content }] },
        { ...auth, ...(key ? { "idempotency-key": key } : {}) },
      );
    const bobKey = "agent:main:openai-user:bob";
    expect((await ask("bob", "bob one")).status).toBe(200);
    const s0 = (await sys.svc.sessions.get(bobKey))!.sessionId;
    // A second user: bob's session is the agent's oldest, over maxEntries 1.
    expect((await ask("carol", "carol one")).status).toBe(200);

    const { pruneOnce } = await import("../../src/workers/session-prune.js");
    const release = beforeNextPush(sys, async () => {
      await pruneOnce(sys.svc, { dryRun: false });
      await archivedAsDeleted(sys, s0);
    });
    const idem = randomUUID();
    const r = await ask("bob", "bob two", idem);
    release();
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe("re: bob two");

    const entry = await sys.svc.sessions.get(bobKey);
    expect(entry).not.toBeNull();
    expect(entry!.sessionId).not.toBe(s0);
    expect(existsSync(join(sessionsDir(sys), `${s0}.jsonl`))).toBe(false);
    expect(await userTexts(sys, bobKey)).toEqual(["bob two"]);

    // The client retries (it never saw the answer): the same run, not a second one.
    const again = await ask("bob", "bob two", idem);
    expect(again.status).toBe(200);
    expect(again.body.choices[0].message.content).toBe("re: bob two");
    expect(await userTexts(sys, bobKey)).toEqual(["bob two"]);
  });

  it("the agent RPC, isolated: queued in the session created again", async () => {
    const sys = await deploy(scriptConfig([{ reply: "echo: {{text}}" }]));
    const key = "agent:main:rpc-deleted";
    const first = await sys.rpc("agent", { sessionKey: key, message: "first" });
    await runOk(sys, first.runId);
    const s0 = (await sys.svc.sessions.get(key))!.sessionId;
    await settle(async () => (await sys.svc.inbox.hasInflight(key)) === false, { what: "the first turn done" });

    let retired = "";
    const release = beforeNextPush(sys, async () => {
      // The isolated run rotated the session first: the delete archives that new sessionId.
      retired = (await sys.svc.sessions.get(key))!.sessionId;
      await sys.rpc("sessions.delete", { key });
      await archiveDone(sys, retired); // no transcript yet: nothing to rename
    });
    const second = await sys.rpc("agent", { sessionKey: key, message: "second", sessionTarget: "isolated" });
    release();
    expect((await runOk(sys, second.runId)).reply).toBe("echo: second");
    expect([s0, retired]).not.toContain(second.sessionId);
    expect((await sys.svc.sessions.get(key))?.sessionId).toBe(second.sessionId);
    expect(existsSync(join(sessionsDir(sys), `${retired}.jsonl`))).toBe(false);
    expect(await userTexts(sys, key)).toEqual(["second"]);
  });
});

describe("a push into a session with no entry", () => {
  it("a sub-agent session (deleted: its spawn writes its entry first) is refused, nothing queued", async () => {
    const sys = await deploy(scriptConfig([{ reply: "echo: {{text}}" }]));
    const key = `agent:main:subagent:${randomUUID()}`;
    const runId = randomUUID();
    const turn = {
      runId,
      sessionKey: key,
      agentId: "main",
      sessionId: randomUUID(),
      text: "steer",
      step: "turn" as const,
      provenance: "inter_session" as const,
    };
    await expect(enqueueTurn(sys.svc, turn)).rejects.toMatchObject({ code: "session_not_found" });
    expect(await sys.svc.runs.get(runId)).toBeNull();
    expect(await sys.svc.inbox.depth(key)).toBe(0);
  });

  it("a push planned on an entry it read (an announce, an a2a step) is refused once deleted", async () => {
    const sys = await deploy(scriptConfig([{ reply: "echo: {{text}}" }]));
    const key = "agent:main:gone";
    const first = await sys.rpc("agent", { sessionKey: key, message: "hello" });
    await runOk(sys, first.runId);
    const entry = (await sys.svc.sessions.get(key))!;
    expect(entry).not.toBeNull();
    expect((await sys.rpc("sessions.delete", { key })).deleted).toBe(true);
    await archiveDone(sys, entry.sessionId);
    const runId = randomUUID();
    const turn = {
      runId,
      sessionKey: key,
      agentId: entry.agentId,
      sessionId: entry.sessionId,
      text: "announce",
      step: "announce" as const,
      provenance: "inter_session" as const,
    };
    await expect(enqueueTurn(sys.svc, turn, { existed: true })).rejects.toMatchObject({ code: "session_not_found" });
    expect(await sys.svc.runs.get(runId)).toBeNull();
    expect(await sys.svc.inbox.depth(key)).toBe(0);
    // Nothing wrote the retired sessionId's transcript again, and the session stays deleted.
    expect(existsSync(join(sessionsDir(sys), `${entry.sessionId}.jsonl`))).toBe(false);
    expect(await sys.svc.sessions.get(key)).toBeNull();
  });

  it("any other internal push is queued where it is (no entry cannot be told from never having one)", async () => {
    const sys = await deploy(scriptConfig([{ reply: "echo: {{text}}" }]));
    const key = "agent:main:never-had-one";
    const sessionId = randomUUID();
    const turn = await enqueueTurn(sys.svc, {
      sessionKey: key,
      agentId: "main",
      sessionId,
      text: "internal",
      step: "turn",
      provenance: "user",
    });
    expect(turn.sessionId).toBe(sessionId);
    expect((await runOk(sys, turn.runId)).reply).toBe("echo: internal");
  });
});
