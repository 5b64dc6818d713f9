/**
 * No input can wedge a session. Each case sends something hostile, then a canary message to the
 * same session, and the canary must be answered: lone UTF-16 surrogates (the reported repro),
 * control and bidi characters, huge text, a runtime reply with a lone surrogate, a turn that
 * bypasses the HTTP edge, a corrupt inbox entry, and a turn that can never run (kept as a dead
 * letter and replayable).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { enqueueTurn, requestDrain } from "../../src/runs/enqueue.js";
import type { Turn } from "../../src/runs/turn.js";
import { announceContinuation } from "../../src/subagents/announce.js";
import { subagentAnnounceJobId } from "../../src/queues/jobs.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { readTranscript, scriptConfig, textOf } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    scriptConfig([
      { when: { contains: "make-bad-reply" }, reply: "bad \ud83d reply {{text}}" },
      { reply: "echo: {{text}}" },
    ]),
  );
});
afterAll(async () => sys?.close());

/** POST /v1/inbound with a raw JSON body (so escapes like \ud83d reach the server as sent). */
async function inboundRaw(json: string): Promise<{ runId: string; sessionKey: string; sessionId: string }> {
  const r = await sys.post("/v1/inbound", json);
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body;
}

async function waitDone(runId: string, timeoutMs = 10_000): Promise<any> {
  return await sys.rpc("agent.wait", { runId, timeoutMs });
}

/**
 * Queue a turn as it is, without the push's check that its sessionId is the session's current
 * one (which would move it there): how a turn stored by a bug or an older version looks.
 */
async function pushUnchecked(req: Omit<Turn, "runId" | "enqueuedAt" | "messageTs">): Promise<Turn> {
  const turn: Turn = { ...req, runId: randomUUID(), enqueuedAt: Date.now(), messageTs: Date.now() };
  await sys.svc.inbox.push(turn);
  await requestDrain(sys.svc, turn.sessionKey);
  return turn;
}

/** Send a canary from `from` and require its answer: the session is not wedged. */
async function expectCanaryAnswered(from: string): Promise<void> {
  const canary = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from, text: `canary ${from}` }));
  const res = await waitDone(canary.runId);
  expect(res.status).toBe("ok");
  expect(res.reply).toBe(`echo: canary ${from}`);
}

describe("text at the edge", () => {
  it("the reported repro: a lone surrogate from mallory is answered and mallory's next message too", async () => {
    const body = '{"channel":"web","chatType":"dm","from":"mallory","text":"hello \\ud83d"}';
    const first = await inboundRaw(body);
    const res = await waitDone(first.runId);
    expect(res.status).toBe("ok");
    expect(res.reply).toBe("echo: hello \ufffd");
    await expectCanaryAnswered("mallory");
    // The transcript holds the well-formed text, and every line is valid JSON.
    const lines = readTranscript(sys.config, first.sessionId);
    expect(lines.some((l) => l.message && textOf(l.message) === "hello \ufffd")).toBe(true);
    // No drain is left spinning on the session: nothing in flight, nothing queued.
    expect(await sys.svc.inbox.hasInflight(first.sessionKey)).toBe(false);
  });

  const hostile: [string, string][] = [
    ["lone high surrogate at the end", '"x \\ud83d"'],
    ["lone low surrogate", '"\\ude00 x"'],
    ["reversed pair", '"\\ude00\\ud83d"'],
    ["NUL and C0 controls", '"a\\u0000b\\u0001\\u001b[31mred"'],
    ["C1 controls", '"a\\u0085b\\u009b"'],
    ["bidi overrides in text", '"\\u202egnp.exe \\u2066x\\u2069"'],
    ["non-characters", '"\\uffff\\ufffe\\ud83f\\udfff"'],
    ["emoji and combining marks", '"👩‍👩‍👧 é e\\u0301"'],
  ];

  it.each(hostile)("%s: answered, and the session's next message too", async (name, textJson) => {
    const from = `u-${name.replace(/[^a-z]/g, "")}`;
    const first = await inboundRaw(`{"channel":"web","chatType":"dm","from":"${from}","text":${textJson}}`);
    const res = await waitDone(first.runId);
    expect(res.status).toBe("ok");
    expect((res.reply as string).isWellFormed()).toBe(true);
    await expectCanaryAnswered(from);
  });

  it("a lone surrogate in the sender id and in metadata is made well-formed, not refused or stuck", async () => {
    const first = await inboundRaw(
      '{"channel":"web","chatType":"dm","from":"eve\\ud800","senderName":"E\\udfff","text":"hi"}',
    );
    expect(first.sessionKey.isWellFormed()).toBe(true);
    expect((await waitDone(first.runId)).status).toBe("ok");
    // The same sender again (same raw id) lands in the same session.
    const again = await inboundRaw('{"channel":"web","chatType":"dm","from":"eve\\ud800","text":"again"}');
    expect(again.sessionKey).toBe(first.sessionKey);
    expect((await waitDone(again.runId)).reply).toBe("echo: again");
  });

  it("a megabyte of text is answered, and the next message too", async () => {
    const text = "é".repeat(512 * 1024);
    const first = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from: "big", text }));
    expect((await waitDone(first.runId, 20_000)).status).toBe("ok");
    await expectCanaryAnswered("big");
  });

  it("a runtime reply with a lone surrogate is stored well-formed and the session goes on", async () => {
    const first = await inboundRaw(
      JSON.stringify({ channel: "web", chatType: "dm", from: "replier", text: "make-bad-reply" }),
    );
    const res = await waitDone(first.runId);
    expect(res.status).toBe("ok");
    expect(res.reply).toBe("bad \ufffd reply make-bad-reply");
    await expectCanaryAnswered("replier");
  });
});

describe("no poison loops behind the edge", () => {
  it("a turn with a lone surrogate queued without the HTTP edge still finishes", async () => {
    const first = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from: "bypass", text: "setup" }));
    await waitDone(first.runId);
    const turn = await enqueueTurn(sys.svc, {
      sessionKey: first.sessionKey,
      agentId: "main",
      sessionId: first.sessionId,
      text: "raw \ud83d text",
      step: "turn",
      provenance: "user",
    });
    const res = await waitDone(turn.runId);
    expect(res.status).toBe("ok");
    expect(res.reply).toBe("echo: raw \ufffd text");
    await expectCanaryAnswered("bypass");
  });

  it("a corrupt inbox entry is moved to the dead letters and the session goes on", async () => {
    const first = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from: "corrupt", text: "setup" }));
    await waitDone(first.runId);
    await sys.svc.redis.rpush(sys.svc.keys.inbox(first.sessionKey), '{"runId": "half a turn');
    await requestDrain(sys.svc, first.sessionKey); // as for any queued entry, a drain exists
    await expectCanaryAnswered("corrupt");
    const letters = (await sys.rpc("deadletters.list")).deadLetters as any[];
    const letter = letters.find((l) => l.sessionKey === first.sessionKey && l.kind === "corrupt");
    expect(letter).toMatchObject({ kind: "corrupt", sessionKey: first.sessionKey });
    expect(letter.raw).toBe('{"runId": "half a turn');
  });

  /** A DM session of `from`, and a turn `text` in it that can never run (given up at once). */
  async function unrunnableTurn(from: string, text: string) {
    const first = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from, text: "setup" }));
    await waitDone(first.runId);
    // A sessionId that is not a safe file name: no retry can ever write its transcript.
    const bad = await pushUnchecked({
      sessionKey: first.sessionKey,
      agentId: "main",
      sessionId: "../../escape",
      text,
      step: "turn",
      provenance: "user",
    });
    return { first, bad, res: await waitDone(bad.runId) };
  }

  it("a turn that can never run errors at once, is dead-lettered, and replays into the current session", async () => {
    const { first, bad, res } = await unrunnableTurn("doomed", "please keep me");
    expect(res.status).toBe("error");
    expect(res.error).toMatch(/cannot run this turn/);
    const record = await sys.svc.runs.get(bad.runId);
    expect(record?.attempts ?? 0).toBeLessThanOrEqual(1); // not retried five times
    await expectCanaryAnswered("doomed");

    const letter = ((await sys.rpc("deadletters.list")).deadLetters as any[]).find((l) => l.runId === bad.runId);
    expect(letter).toMatchObject({ kind: "permanent", sessionKey: first.sessionKey, turn: { text: "please keep me" } });
    const metrics = await sys.get("/metrics");
    expect(String(metrics.body)).toMatch(/switchboard_runs_given_up_total\{[^}]*reason="poisoned"\} [1-9]/);

    const replay = await sys.rpc("deadletters.replay", { runId: bad.runId });
    expect(replay.count).toBe(1);
    const again = await waitDone(replay.replayed[0].replayedAs);
    expect(again).toMatchObject({ status: "ok", reply: "echo: please keep me" });
    expect(((await sys.rpc("deadletters.list")).deadLetters as any[]).some((l) => l.runId === bad.runId)).toBe(false);
    const texts = readTranscript(sys.config, first.sessionId).map((l) => textOf(l.message));
    expect(texts.filter((t) => t === "please keep me")).toHaveLength(1);
  });

  it("a letter replayed after its session was deleted runs in the session created again", async () => {
    const { first, bad, res } = await unrunnableTurn("deleted", "keep me too");
    expect(res.status).toBe("error");
    expect((await sys.rpc("sessions.delete", { key: first.sessionKey })).deleted).toBe(true);
    const old = join(sys.config.storage.dir, "agents", "main", "sessions", `${first.sessionId}.jsonl`);
    await settle(() => !existsSync(old), { what: "the deleted session's transcript archived" });

    const replay = await sys.rpc("deadletters.replay", { runId: bad.runId });
    const again = await waitDone(replay.replayed[0].replayedAs);
    expect(again).toMatchObject({ status: "ok", reply: "echo: keep me too" });
    // Not in the retired sessionId (a live transcript no entry names), but in the session made again.
    expect(existsSync(old)).toBe(false);
    const now = (await sys.svc.sessions.get(first.sessionKey))!;
    expect(now.sessionId).not.toBe(first.sessionId);
    const texts = readTranscript(sys.config, now.sessionId).map((l) => textOf(l.message));
    expect(texts).toContain("keep me too");
  });

  it("a turn given up still leads where a failed run leads: its sub-agent announce, its reset's archive", async () => {
    const key = "agent:main:subagent:given-up";
    const entry = await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId: randomUUID() });
    const runId = randomUUID();
    const turn: Turn = {
      runId,
      sessionKey: key,
      agentId: "main",
      sessionId: "../../escape", // never runnable: given up at once
      text: "doomed task",
      step: "turn",
      provenance: "inter_session",
      archive: { sessionId: "retired-by-reset", kind: "reset" },
      continuation: announceContinuation(sys.svc, key, runId),
      enqueuedAt: Date.now(),
      messageTs: Date.now(),
    };
    await sys.svc.inbox.push(turn);
    await requestDrain(sys.svc, key);
    expect((await waitDone(runId)).status).toBe("error");
    const announce = await settle(() => sys.svc.queues.announce.getJob(subagentAnnounceJobId(key, runId)), {
      what: "the announce of the given-up child queued",
    });
    expect(announce.data).toMatchObject({ childKey: key, runId, status: "error" });
    expect(await sys.svc.queues.maintenance.getJob("archive-retired-by-reset-reset")).toBeDefined();
    expect((await sys.svc.sessions.get(key))?.sessionId).toBe(entry.sessionId);
  });

  it("a turn stored by an older version (runId not first in its JSON) is still freed by its finish", async () => {
    const first = await inboundRaw(JSON.stringify({ channel: "web", chatType: "dm", from: "legacy", text: "setup" }));
    await waitDone(first.runId);
    const runId = "0f0f0f0f-1111-4222-a333-444455556666";
    const now = Date.now();
    const legacy = {
      sessionKey: first.sessionKey,
      agentId: "main",
      sessionId: first.sessionId,
      text: 'says "runId":"x"',
      step: "turn",
      provenance: "user",
      runId,
      enqueuedAt: now,
      messageTs: now,
    };
    await sys.svc.redis
      .multi()
      .hset(sys.svc.keys.run(runId), { runId, sessionKey: first.sessionKey, status: "queued", createdAt: String(now) })
      .rpush(sys.svc.keys.inbox(first.sessionKey), JSON.stringify(legacy))
      .exec();
    await requestDrain(sys.svc, first.sessionKey);
    expect(await waitDone(runId)).toMatchObject({ status: "ok", reply: 'echo: says "runId":"x"' });
    await settle(async () => !(await sys.svc.inbox.hasInflight(first.sessionKey)), {
      what: "the legacy turn's in-flight slot freed",
    });
    await expectCanaryAnswered("legacy");
  });
});

describe("many large dead letters", () => {
  it("list reads them in chunks and cuts each message; get has one whole", async () => {
    const key = sys.svc.keys.deadLetters();
    const before = (await sys.rpc("deadletters.list")).count as number;
    const big = "x".repeat(100_000);
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const runId = `big-letter-${i}`;
      ids.push(runId);
      const letter = {
        runId,
        sessionKey: "agent:main:big-letters",
        reason: "test",
        kind: "permanent",
        failedAt: 1_700_000_000_000 + i,
        replays: 0,
        turn: { runId, sessionKey: "agent:main:big-letters", agentId: "main", sessionId: "s", text: `${i}:${big}` },
      };
      await sys.svc.redis.hset(key, runId, JSON.stringify(letter));
    }
    try {
      const listed = await sys.rpc("deadletters.list");
      expect(listed.count).toBe(before + 60);
      const ours = (listed.deadLetters as any[]).filter((l) => ids.includes(l.runId));
      expect(ours.map((l) => l.runId)).toEqual(ids); // oldest first
      for (const l of ours) {
        expect(l.turn.text).toHaveLength(4001); // 4000 characters and the ellipsis
        expect(l).toMatchObject({ textTruncated: true, textChars: 100_000 + String(ours.indexOf(l)).length + 1 });
      }
      const whole = await sys.rpc("deadletters.get", { runId: ids[7] });
      expect(whole.turn.text).toBe(`7:${big}`);
      expect(whole.textTruncated).toBeUndefined();
      const missing = await sys.post("/v1/rpc/deadletters.get", { runId: "no-such-run" });
      expect(missing.body.error.code).toBe("not_found");
    } finally {
      await sys.svc.redis.hdel(key, ...ids);
    }
  });
});
