/**
 * session.maintenance as OpenClaw configures it: sessions idle longer than pruneAfter are
 * removed, each agent is capped at maxEntries (oldest first), removed transcripts are archived
 * as `.deleted.<ts>`; warn mode (the default) is a dry run that only reports; the pass runs as a
 * scheduled BullMQ job and on demand through `sessions.cleanup`.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

const DAY = 86_400_000;
const systems: TestSystem[] = [];

afterAll(async () => {
  for (const s of systems) await s.close();
});

async function seed(sys: TestSystem, key: string, updatedAt: number): Promise<string> {
  const sessionId = `sid-${key.split(":").pop()}`;
  await sys.svc.sessions.upsert(key, { agentId: "main", kind: "other" }, { sessionId }, { now: updatedAt });
  return sessionId;
}

describe("session.maintenance", () => {
  it("warn mode reports what enforce removes; sessions.cleanup enforces on demand, archives transcripts", async () => {
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "1d", maxEntries: 3 } },
      maintenance: { sweepEveryMs: 3_600_000 },
    });
    systems.push(sys);
    const now = Date.now();
    await seed(sys, "agent:main:old1", now - 5 * DAY);
    await seed(sys, "agent:main:old2", now - 3 * DAY);
    for (let i = 1; i <= 4; i++) await seed(sys, `agent:main:n${i}`, now - (10 - i) * 60_000);
    const oldSid = (await sys.svc.sessions.get("agent:main:old1"))!.sessionId;
    await sys.svc.transcripts.append("main", oldSid, [
      { type: "message", id: "x1", timestamp: new Date().toISOString(), message: { role: "user", content: "old" } },
    ]);

    const schedulers = await sys.svc.queues.maintenance.getJobSchedulers();
    expect(schedulers.map((s) => s.key)).toContain("session-prune");

    const dry = await sys.rpc("sessions.cleanup", {});
    expect(dry).toEqual({
      dryRun: true,
      pruned: ["agent:main:old1", "agent:main:old2"],
      capped: ["agent:main:n1"],
      busy: [],
    });
    expect(await sys.svc.sessions.get("agent:main:old1")).not.toBeNull();

    const done = await sys.rpc("sessions.cleanup", { dryRun: false });
    expect(done).toMatchObject({
      dryRun: false,
      pruned: ["agent:main:old1", "agent:main:old2"],
      capped: ["agent:main:n1"],
    });
    for (const k of ["old1", "old2", "n1"]) expect(await sys.svc.sessions.get(`agent:main:${k}`)).toBeNull();
    for (const k of ["n2", "n3", "n4"]) expect(await sys.svc.sessions.get(`agent:main:${k}`)).not.toBeNull();
    const dir = join(sys.config.storage.dir, "agents", "main", "sessions");
    await settle(() => readdirSync(dir).some((f) => f.startsWith(`${oldSid}.jsonl.deleted.`)), {
      what: "the pruned session's transcript archived as .deleted",
    });
    expect(existsSync(join(dir, `${oldSid}.jsonl`))).toBe(false);
    expect(await sys.rpc("sessions.cleanup", { dryRun: false })).toMatchObject({ pruned: [], capped: [] });
  });

  it("a session active since the prune picked it is kept: the delete checks idleness itself", async () => {
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "1d", maxEntries: 100 } },
      maintenance: { sweepEveryMs: 3_600_000 },
    });
    systems.push(sys);
    const picked = Date.now() - 5 * DAY;
    const key = "agent:main:woke-up";
    await seed(sys, key, picked);
    const ident = { agentId: "main", kind: "other" as const };
    // A message after the pick: its activity moves updatedAt past the picked time.
    await sys.svc.sessions.upsert(key, ident, {}, { activity: "touch" });
    expect(await sys.svc.sessions.deleteIfIdleSince(key, "main", "other", picked)).toBe("busy");
    // Idle since the pick, but a turn queued: kept too.
    const quiet = "agent:main:queued";
    const sid = await seed(sys, quiet, picked);
    await sys.svc.redis.rpush(
      sys.svc.keys.inbox(quiet),
      JSON.stringify({ runId: "r", sessionKey: quiet, sessionId: sid }),
    );
    expect(await sys.svc.sessions.deleteIfIdleSince(quiet, "main", "other", picked)).toBe("busy");
    await sys.svc.redis.del(sys.svc.keys.inbox(quiet));
    expect(
      (await sys.svc.sessions.deleteIfIdleSince(quiet, "main", "other", picked)) as { sessionId: string },
    ).toMatchObject({
      sessionId: sid,
    });
    // The pass itself: the woken session is not a candidate any more; nothing else to do.
    expect(await sys.rpc("sessions.cleanup", { dryRun: false })).toMatchObject({ pruned: [], busy: [] });
    expect(await sys.svc.sessions.get(key)).not.toBeNull();
  });

  it("enforce mode removes stale sessions by itself, as a scheduled job", async () => {
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { mode: "enforce", pruneAfter: "2h", maxEntries: 500 } },
      maintenance: { sweepEveryMs: 1000 },
    });
    systems.push(sys);
    await seed(sys, "agent:main:stale", Date.now() - 3 * 3_600_000);
    await seed(sys, "agent:main:recent", Date.now());
    await settle(async () => (await sys.svc.sessions.get("agent:main:stale")) === null, {
      what: "the scheduled prune removing the stale session",
      timeoutMs: 15_000,
    });
    expect(await sys.svc.sessions.get("agent:main:recent")).not.toBeNull();
  });

  it("without session.maintenance nothing is scheduled and sessions.cleanup says so", async () => {
    const sys = await startTestSystem({ session: { reset: { mode: "off" } } });
    systems.push(sys);
    expect((await sys.svc.queues.maintenance.getJobSchedulers()).map((s) => s.key)).not.toContain("session-prune");
    const r = await sys.post("/v1/rpc/sessions.cleanup", {});
    expect(r.body.ok).toBe(false);
  });
});
