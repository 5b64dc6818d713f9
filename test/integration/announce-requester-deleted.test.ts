/**
 * A sub-agent's announce reads its requester's entry, then queues the completion turn in that
 * session. A top-level requester deleted between the two (sessions.delete, pruning) used to get
 * the turn anyway, queued unchecked into its retired sessionId: the turn ran in a session that no
 * longer existed and wrote a live transcript under the deleted sessionId, which no entry named
 * and nothing archived again. The push now says it was planned on an entry it read
 * (`existed`), so it is refused, and the announce ends as if the requester had not been found. The
 * window is widened by holding the announce's push until the delete and its archive ran.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Turn } from "../../src/runs/turn.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { tool, toolsConfig } from "../fixtures/tools-support.js";
import { announced, groupRequester, tidesAgent } from "../fixtures/subagents-support.js";
import { settle } from "../helpers/settle.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      channels: { telegram: { kind: "log" } },
      agents: {
        defaults: { subagents: { archiveAfterMinutes: 0, announceBackoffMs: 50 } },
        list: [tidesAgent()],
      },
    }),
  );
});

afterAll(async () => {
  await sys?.close();
});

type Push = (turn: Turn, ...rest: unknown[]) => Promise<unknown>;

it("an announce whose top-level requester is deleted before its push queues nothing there", async () => {
  const requester = await groupRequester(sys, "telegram", "tides-gone");
  const entry = (await sys.svc.sessions.get(requester))!;
  const transcript = join(sys.config.storage.dir, "agents", entry.agentId, "sessions", `${entry.sessionId}.jsonl`);
  expect(existsSync(transcript)).toBe(true);

  // The requester deleted (and its transcript archived) just before the announce's push goes out.
  const inbox = sys.svc.inbox as unknown as { push: Push };
  const realPush = inbox.push.bind(inbox);
  let held = 0;
  inbox.push = async (turn, ...rest) => {
    if (turn.sessionKey === requester && turn.step === "announce" && held++ === 0) {
      expect((await sys.rpc("sessions.delete", { key: requester })).deleted).toBe(true);
      await settle(() => !existsSync(transcript), { what: "the requester's transcript archived" });
    }
    return await realPush(turn, ...rest);
  };
  try {
    const spawn = await tool(sys, "sessions_spawn", requester, { task: "look up the tides", cleanup: "keep" });
    expect(spawn.status).toBe("accepted");
    const run = await announced(sys, spawn.runId);
    expect(held).toBeGreaterThanOrEqual(1);
    expect(run).toMatchObject({ announce: "failed", announceError: "requester session no longer exists" });
    // No completion turn ran in the deleted session: no live transcript under its sessionId, and
    // the session was not brought back.
    expect(existsSync(transcript)).toBe(false);
    expect(await sys.svc.sessions.get(requester)).toBeNull();
    expect(await sys.svc.inbox.depth(requester)).toBe(0);
  } finally {
    inbox.push = realPush;
  }
});
