/**
 * session.maintenance as OpenClaw configures it: sessions idle longer than pruneAfter are
 * removed, each agent is capped at maxEntries (oldest first), removed transcripts are archived
 * as `.deleted.<ts>`; warn mode (the default) is a dry run that only reports; the pass runs as a
 * scheduled BullMQ job and on demand through `sessions.cleanup`.
 */
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { archivePath } from "../../src/transcript/paths.js";
import { archiveOf, pruneDue, pruneOnce } from "../../src/workers/session-prune.js";
import { rotateSession } from "../../src/rotation/rotate.js";

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
      archives: [],
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

  it("sessions.reset of a long-idle session keeps it from pruning; a sweep's rollover does not", async () => {
    // Finding: pruning read updatedAt, which sessions.reset left at the last message, so an
    // operator's reset did not protect a session the way OpenClaw's (a touch) does.
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "1d", maxEntries: 100 } },
      maintenance: { sweepEveryMs: 3_600_000 },
    });
    systems.push(sys);
    const idle = Date.now() - 5 * DAY;
    await seed(sys, "agent:main:op-reset", idle);
    await seed(sys, "agent:main:swept", idle);
    await sys.rpc("sessions.reset", { key: "agent:main:op-reset" });
    // What the sweep does to a stale session: a rollover that is not activity.
    await rotateSession(sys.svc, (await sys.svc.sessions.get("agent:main:swept"))!, {
      reason: "idle",
      archive: "job",
      activity: "preserve",
    });
    expect((await sys.rpc("sessions.cleanup", { dryRun: false })).pruned).toEqual(["agent:main:swept"]);
    expect(await sys.svc.sessions.get("agent:main:op-reset")).not.toBeNull();
  });

  it("the prune job goes batch after batch within its budget, logs its progress, says what is left", async () => {
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "1d", maxEntries: 100 } },
      maintenance: { sweepEveryMs: 3_600_000, sweepBatch: 3 },
    });
    systems.push(sys);
    for (let i = 0; i < 8; i++) await seed(sys, `agent:main:backlog${i}`, Date.now() - 5 * DAY + i);
    await seed(sys, "agent:main:recent", Date.now());
    // Enforced here, not by the config: the scheduled job (warn mode) removes nothing meanwhile.
    const logged: { fields: unknown; msg: string }[] = [];
    const log = { ...sys.svc.log, info: (fields: unknown, msg: string) => logged.push({ fields, msg }) };
    const m = sys.svc.config.session.maintenance!;
    const svc = {
      ...sys.svc,
      log: log as unknown as typeof sys.svc.log,
      config: {
        ...sys.svc.config,
        session: { ...sys.svc.config.session, maintenance: { ...m, mode: "enforce" as const } },
      },
    };
    // No budget: one batch, and the rest is reported as still due (and logged).
    expect(await pruneDue(svc, 0)).toMatchObject({ dryRun: false, batches: 1, pruned: 3, remaining: 5 });
    expect(logged.map((l) => l.msg)).toEqual([expect.stringContaining("still idle past pruneAfter")]);
    expect(logged[0]!.fields).toMatchObject({ remaining: 5 });
    logged.length = 0;
    // A budget: batches until the backlog is gone (the last one not full), each one logged.
    const progress: number[] = [];
    const rest = await pruneDue(svc, 60_000, async (done) => progress.push(done.pruned));
    expect(rest).toMatchObject({ batches: 2, pruned: 5, busy: 0, remaining: 0 });
    expect(progress).toEqual([3, 5]);
    expect(logged.map((l) => l.fields)).toEqual([expect.objectContaining({ batches: 1, pruned: 3 })]);
    for (let i = 0; i < 8; i++) expect(await sys.svc.sessions.get(`agent:main:backlog${i}`)).toBeNull();
    expect(await sys.svc.sessions.get("agent:main:recent")).not.toBeNull();
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

describe("session.maintenance: transcript archives", () => {
  const NOW = Date.UTC(2026, 10, 20, 12);
  const dirOf = (sys: TestSystem, agent = "main") => join(sys.config.storage.dir, "agents", agent, "sessions");
  /** Writes a file named `<sid>.jsonl` (or `<sid>.jsonl.<kind>.<ts>` archived at `at`); returns its name. */
  function file(dir: string, sid: string, kind?: "reset" | "deleted", at = NOW): string {
    mkdirSync(dir, { recursive: true });
    const live = join(dir, `${sid}.jsonl`);
    const path = kind ? archivePath(live, kind, at) : live;
    writeFileSync(path, "{}\n");
    // An old mtime everywhere: retention is read from the archive's name, never the file's age.
    utimesSync(path, new Date(NOW - 400 * DAY), new Date(NOW - 400 * DAY));
    return path.slice(dir.length + 1);
  }

  it("archive names parse to their kind and instant; nothing else does", () => {
    expect(archiveOf("abc.jsonl.reset.2026-05-17T07-35-46.420Z")).toEqual({
      kind: "reset",
      archivedAt: Date.UTC(2026, 4, 17, 7, 35, 46, 420),
    });
    expect(archiveOf("abc-topic-7.jsonl.deleted.2026-05-17T07-35-46Z")?.kind).toBe("deleted");
    for (const name of [
      "abc.jsonl",
      "abc-topic-7.jsonl",
      "abc.jsonl.bak.2026-05-17T07-35-46.420Z",
      "abc.jsonl.reset.2026-05-17T07-35-46.420Z.tmp",
      "abc.jsonl.reset.yesterday",
      "abc.jsonl.reset.2026-13-45T99-99-99.000Z",
    ])
      expect(archiveOf(name), name).toBeUndefined();
  });

  it(".reset archives go after resetArchiveRetention, .deleted after pruneAfter; live transcripts stay", async () => {
    const sys = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "30d", resetArchiveRetention: "2d" } },
      agents: { list: [{ id: "main", default: true }, { id: "ops" }] },
      maintenance: { sweepEveryMs: 3_600_000 },
    });
    systems.push(sys);
    const main = dirOf(sys);
    const ops = dirOf(sys, "ops");
    const expired = [
      file(main, "r-old", "reset", NOW - 3 * DAY),
      file(main, "t-old-topic-9", "reset", NOW - 3 * DAY),
      file(main, "d-old", "deleted", NOW - 31 * DAY),
    ];
    const opsExpired = file(ops, "o-old", "reset", NOW - 10 * DAY);
    const kept = [
      file(main, "r-new", "reset", NOW - 1 * DAY),
      file(main, "d-mid", "deleted", NOW - 3 * DAY), // past the reset retention, not pruneAfter
      file(main, "live"),
      file(main, "live-topic-3"),
    ];
    writeFileSync(join(main, "notes.jsonl.bak.2020-01-01T00-00-00.000Z"), "");
    mkdirSync(join(main, "dir.jsonl.reset.2020-01-01T00-00-00.000Z"));

    // Warn mode (the default): reported, nothing deleted.
    const dry = await pruneOnce(sys.svc, { now: NOW });
    expect(dry.dryRun).toBe(true);
    expect([...dry.archives].sort()).toEqual(
      [...expired.map((n) => `agents/main/sessions/${n}`), `agents/ops/sessions/${opsExpired}`].sort(),
    );
    for (const n of [...expired, ...kept]) expect(existsSync(join(main, n)), n).toBe(true);

    // Enforced: exactly those are gone.
    const done = await pruneOnce(sys.svc, { now: NOW, dryRun: false });
    expect([...done.archives].sort()).toEqual([...dry.archives].sort());
    for (const n of expired) expect(existsSync(join(main, n)), n).toBe(false);
    expect(existsSync(join(ops, opsExpired))).toBe(false);
    for (const n of kept) expect(existsSync(join(main, n)), n).toBe(true);
    expect(existsSync(join(main, "notes.jsonl.bak.2020-01-01T00-00-00.000Z"))).toBe(true);
    expect(existsSync(join(main, "dir.jsonl.reset.2020-01-01T00-00-00.000Z"))).toBe(true);
    expect((await pruneOnce(sys.svc, { now: NOW, dryRun: false })).archives).toEqual([]);
  });

  it("retention defaults to pruneAfter; false keeps .reset archives; a run deletes at most sweepBatch", async () => {
    const byDefault = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "5d" } },
      maintenance: { sweepEveryMs: 3_600_000, sweepBatch: 2 },
    });
    systems.push(byDefault);
    const dir = dirOf(byDefault);
    const old = ["a", "b", "c"].map((sid) => file(dir, sid, "reset", NOW - 6 * DAY));
    const young = file(dir, "y", "reset", NOW - 4 * DAY);
    const first = await pruneOnce(byDefault.svc, { now: NOW, dryRun: false });
    expect(first.archives).toHaveLength(2); // the batch
    const second = await pruneOnce(byDefault.svc, { now: NOW, dryRun: false });
    expect(second.archives).toHaveLength(1); // the next run continues
    for (const n of old) expect(existsSync(join(dir, n)), n).toBe(false);
    expect(existsSync(join(dir, young))).toBe(true);

    const keepForever = await startTestSystem({
      session: { reset: { mode: "off" }, maintenance: { pruneAfter: "5d", resetArchiveRetention: false } },
      maintenance: { sweepEveryMs: 3_600_000 },
    });
    systems.push(keepForever);
    const dir2 = dirOf(keepForever);
    const reset = file(dir2, "r", "reset", NOW - 400 * DAY);
    const deleted = file(dir2, "d", "deleted", NOW - 6 * DAY);
    expect((await pruneOnce(keepForever.svc, { now: NOW, dryRun: false })).archives).toEqual([
      `agents/main/sessions/${deleted}`,
    ]);
    expect(existsSync(join(dir2, reset))).toBe(true);
  });
});
