/**
 * `/send on` on a stale session whose turn is still running: the session is rolled over with the
 * policy set, as a message would roll it over while a turn runs (the archive job waits for the
 * retired sessionId's turn). Before, the rollover required the session to be idle: refused, the
 * policy went on the retiring session, and the next message's stale rollover cleared it.
 */
import { afterAll, describe, expect, it } from "vitest";
import { cleanUp, deploy, inbound, runOk, sessionFiles, waitRunning } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";
import { scriptConfig } from "../fixtures/runs-support.js";

afterAll(cleanUp);

describe("/send on a stale session with a turn running", () => {
  it("rolls the session over with the policy, which the next message keeps", async () => {
    const sys = await deploy(
      scriptConfig([{ when: { regex: "^slow" }, delayMs: 2000, reply: "slow done" }, { reply: "echo: {{text}}" }], {
        session: { dmScope: "per-peer", reset: { mode: "idle", idleMinutes: 10 } },
        commands: { ownerAllowFrom: ["telegram:owner"] },
      }),
    );
    const MIN = 60_000;
    const t0 = Date.now() - 30 * MIN;
    const msg = (text: string, timestamp: number) => ({
      channel: "telegram",
      chatType: "dm",
      from: "owner",
      text,
      timestamp,
    });
    const m1 = await inbound(sys, msg("slow work", t0));
    await waitRunning(sys, m1.runId);
    // 15 minutes after m1: stale under idleMinutes 10, and m1's turn still running.
    const send = await inbound(sys, msg("/send on", t0 + 15 * MIN));
    expect(send.sendPolicy).toBe("allow");
    expect(send.sessionId).not.toBe(m1.sessionId);
    const rolled = await sys.svc.sessions.get(m1.sessionKey);
    expect(rolled).toMatchObject({ sessionId: send.sessionId, sendPolicy: "allow" });

    // A minute later: the session /send made is fresh, so its policy stays.
    const m2 = await inbound(sys, msg("hello", t0 + 16 * MIN));
    expect(m2.sessionId).toBe(send.sessionId);
    expect((await sys.svc.sessions.get(m1.sessionKey))?.sendPolicy).toBe("allow");

    // The running turn finished in its own transcript, archived only after it.
    expect((await runOk(sys, m1.runId)).reply).toBe("slow done");
    expect((await runOk(sys, m2.runId)).reply).toBe("echo: hello");
    await settle(() => sessionFiles(sys).some((f) => f.startsWith(`${m1.sessionId}.jsonl.reset.`)), {
      what: "m1's transcript archived",
    });
    expect(sessionFiles(sys)).not.toContain(`${m1.sessionId}.jsonl`);
  });
});
