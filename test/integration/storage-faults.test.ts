/**
 * Storage faults are waited out, not turned into lost messages. Transcript storage refuses
 * writes (a full disk: a small tmpfs filled up; an unwritable directory for a worker process
 * that is not root) while messages keep arriving. Every acknowledged message must be answered
 * once storage returns, in order, each transcript line once, no torn line; meanwhile /readyz
 * and /metrics say storage is unhealthy and a caller who stops waiting is told why. Past the
 * deadline a run fails and its message is kept as a dead letter that replays.
 *
 * Needs root (mount, setuid); as a non-root user the unwritable-directory case runs in-process.
 */
import {
  chmodSync,
  chownSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { startTestSystem, writeConfigFile, spawnSwitchboard, type TestSystem } from "../helpers/system.js";
import { tempDir } from "../helpers/context.js";
import { readTranscript, readyStorage, scriptConfig, textOf } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";
import { deliveries } from "../helpers/api.js";
import { createRuntime } from "../../src/runtimes/registry.js";
import { agentRuntime } from "../../src/config/agents.js";
import { fillDisk } from "../helpers/disk-full.js";

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => {});
});
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => {});
});

/** A tmpfs of `size` mounted on a fresh directory (unmounted after the test). */
function smallDisk(size = "2m"): string {
  const { dir, cleanup } = tempDir("sb-tmpfs");
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0755`, "tmpfs", dir]);
  cleanups.push(() => {
    execFileSync("umount", ["-l", dir]);
    cleanup();
  });
  return dir;
}

function chmodTree(dir: string, fileMode: number, dirMode: number): void {
  chmodSync(dir, dirMode);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) chmodTree(p, fileMode, dirMode);
    else chmodSync(p, fileMode);
  }
}

function chownTree(dir: string, uid: number): void {
  chownSync(dir, uid, uid);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid);
    else chownSync(p, uid, uid);
  }
}

async function inbound(sys: TestSystem, from: string, text: string) {
  const r = await sys.post("/v1/inbound", { channel: "telegram", chatType: "dm", from, text });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body as { runId: string; sessionKey: string; sessionId: string };
}

/** Every line parses, each message id once, and the conversation is exactly `texts`, each answered. */
function expectWholeTranscript(sys: TestSystem, sessionId: string, texts: string[]): void {
  const file = readTranscript(sys.config, sessionId); // throws on any line that is not JSON
  const raw = readFileSync(join(sys.config.storage.dir, "agents", "main", "sessions", `${sessionId}.jsonl`), "utf8");
  expect(raw.endsWith("\n")).toBe(true);
  const ids = file.filter((l) => l.type === "message").map((l) => l.id);
  expect(new Set(ids).size).toBe(ids.length);
  const conv = file.filter((l) => l.message).map((l) => `${l.message!.role}:${textOf(l.message)}`);
  expect(conv).toEqual(texts.flatMap((t) => [`user:${t}`, `assistant:re: ${t}`]));
}

const RULES = [{ delayMs: 5, reply: "re: {{text}}" }];
const PAD = ` ${"x".repeat(5000)}`;

describe.skipIf(!isRoot)("storage faults (root: tmpfs and a non-root worker)", () => {
  it("a full disk parks turns; they all complete, in order and whole, when space returns", async () => {
    const disk = smallDisk();
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: disk, faultRetryMaxDelayMs: 400 } }));
    cleanups.push(() => sys.close());
    const peers = ["p0", "p1", "p2", "p3", "p4"];
    const sent = new Map<string, string[]>();
    const sessionIds = new Map<string, string>();
    for (const p of peers) {
      const r = await inbound(sys, p, `${p} hello`);
      expect((await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 })).status).toBe("ok");
      sent.set(p, [`${p} hello`]);
      sessionIds.set(p, r.sessionId);
    }

    const free = fillDisk(disk);
    const runIds: string[] = [];
    for (let i = 1; i <= 4; i++) {
      for (const p of peers) {
        const text = `${p} m${i}${PAD}`;
        runIds.push((await inbound(sys, p, text)).runId);
        sent.get(p)!.push(text);
      }
    }
    // Unhealthy is visible, and a caller who stops waiting is told why.
    await settle(async () => (await readyStorage(sys.url)) === "unhealthy", {
      what: "/readyz saying storage is unhealthy",
      timeoutMs: 10_000,
    });
    // Reported, but the gateway stays ready: it goes on queuing turns, which wait for storage.
    const ready = await sys.get("/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ ok: true, storage: "unhealthy", code: "ENOSPC" });
    expect(ready.body.warning).toMatch(/ENOSPC/);
    const waited = await sys.rpc("agent.wait", { runId: runIds[0], timeoutMs: 300 });
    expect(waited.status).toBe("timeout");
    expect(waited.error).toMatch(/storage unavailable \(ENOSPC/);
    expect(String((await sys.get("/metrics")).body)).toMatch(/switchboard_storage_healthy\{[^}]*\} 0/);

    free();
    for (const id of runIds) expect((await sys.rpc("agent.wait", { runId: id, timeoutMs: 20_000 })).status).toBe("ok");
    await settle(async () => (await readyStorage(sys.url)) === "ok", {
      what: "/readyz saying storage is ok again",
      timeoutMs: 10_000,
    });
    for (const p of peers) expectWholeTranscript(sys, sessionIds.get(p)!, sent.get(p)!);
    expect((await sys.rpc("deadletters.list")).count).toBe(0);
  }, 60_000);

  it("a directory made unwritable for a worker that is not root: nothing acknowledged is lost", async () => {
    const { dir: storage } = tempDir("sb-perm");
    cleanups.push(() => rmSync(storage, { recursive: true, force: true }));
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage, faultRetryMaxDelayMs: 400 } }), {
      gateway: true,
      workers: false,
    });
    cleanups.push(() => sys.close());
    chownTree(storage, NOBODY);
    chmodSync(storage, 0o755);
    const cfgFile = writeConfigFile(sys.config);
    chmodSync(join(cfgFile, ".."), 0o755);
    chmodSync(cfgFile, 0o644);
    const worker = await spawnSwitchboard(
      ["worker", "--config", cfgFile],
      { REDIS_URL: sys.config.redis.url, SWITCHBOARD_STATE_DIR: storage, HOME: storage },
      20_000,
      { uid: NOBODY, gid: NOBODY },
    );
    cleanups.push(() => worker.kill9());

    const first = await inbound(sys, "locked", "locked hello");
    expect((await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 })).status).toBe("ok");
    expect(statSync(join(storage, "agents")).uid).toBe(NOBODY); // the worker, not root, wrote it

    chmodTree(storage, 0o444, 0o555);
    const texts = ["locked hello"];
    const runIds: string[] = [];
    for (let i = 1; i <= 3; i++) {
      texts.push(`locked m${i}`);
      runIds.push((await inbound(sys, "locked", `locked m${i}`)).runId);
    }
    // A new session needs a new file: EACCES. (The existing session may still be written through
    // a handle its worker opened before the change, as any process with an open file would.)
    const newcomer = await inbound(sys, "newcomer", "newcomer hello");
    await settle(async () => (await readyStorage(sys.url)) === "unhealthy", {
      what: "/readyz saying storage is unhealthy",
      timeoutMs: 10_000,
    });
    const waited = await sys.rpc("agent.wait", { runId: newcomer.runId, timeoutMs: 300 });
    expect(waited).toMatchObject({ status: "timeout" });
    expect(waited.error).toMatch(/EACCES/);

    chmodTree(storage, 0o644, 0o755);
    for (const id of [...runIds, newcomer.runId])
      expect((await sys.rpc("agent.wait", { runId: id, timeoutMs: 20_000 })).status).toBe("ok");
    expectWholeTranscript(sys, first.sessionId, texts);
    expectWholeTranscript(sys, newcomer.sessionId, ["newcomer hello"]);
    await settle(async () => (await readyStorage(sys.url)) === "ok", {
      what: "/readyz saying storage is ok again",
      timeoutMs: 10_000,
    });
  }, 60_000);

  it("past the deadline a run fails with the reason, is dead-lettered, and replays once storage is back", async () => {
    const disk = smallDisk();
    const sys = await startTestSystem(
      scriptConfig(RULES, { storage: { dir: disk, faultRetryMaxDelayMs: 200, faultDeadlineMinutes: 0.02 } }),
    );
    cleanups.push(() => sys.close());
    const first = await inbound(sys, "late", "late hello");
    await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 });
    const free = fillDisk(disk);
    const doomed = await inbound(sys, "late", `late keep me${PAD}`);
    const res = await sys.rpc("agent.wait", { runId: doomed.runId, timeoutMs: 15_000 });
    expect(res.status).toBe("error");
    expect(res.error).toMatch(/storage unavailable .*ENOSPC.*gave up/);
    const letters = (await sys.rpc("deadletters.list")).deadLetters as any[];
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ runId: doomed.runId, kind: "storage", textTruncated: true });
    // The listing cuts long messages; the letter itself is whole.
    expect(await sys.rpc("deadletters.get", { runId: doomed.runId })).toMatchObject({
      turn: { text: `late keep me${PAD}` },
    });
    expect(String((await sys.get("/metrics")).body)).toMatch(/switchboard_dead_letters\{[^}]*\} 1/);

    free();
    const replay = await sys.rpc("deadletters.replay", { all: true });
    expect(replay.count).toBe(1);
    expect(await sys.rpc("agent.wait", { runId: replay.replayed[0].replayedAs, timeoutMs: 15_000 })).toMatchObject({
      status: "ok",
      reply: `re: late keep me${PAD}`,
    });
    expect((await sys.rpc("deadletters.list")).count).toBe(0);
    const conv = readTranscript(sys.config, first.sessionId)
      .filter((l) => l.message)
      .map((l) => textOf(l.message));
    expect(conv.filter((t) => t === `late keep me${PAD}`)).toHaveLength(1);
    expect(conv.at(-1)).toBe(`re: late keep me${PAD}`);
  }, 60_000);
});

describe.skipIf(!isRoot)("storage faults: what a parked turn keeps", () => {
  it("the outcome saved while parked holds no credential from its tool calls; the turn completes whole", async () => {
    const disk = smallDisk();
    const secret = "sk-proj-abcdefghijklmnopqrstuvwx123456";
    const rules = [
      {
        when: { contains: "look it up" },
        tools: [{ name: "sessions_list", args: { search: secret } }],
        reply: "looked{{text}}",
      },
      ...RULES,
    ];
    const sys = await startTestSystem(scriptConfig(rules, { storage: { dir: disk, faultRetryMaxDelayMs: 300 } }));
    cleanups.push(() => sys.close());
    const first = await inbound(sys, "sec", "sec hello");
    await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 });
    const free = fillDisk(disk);
    const parked = await inbound(sys, "sec", `look it up${PAD}`);
    // Parked after its runtime ran: the outcome is on the record, the secret is not.
    const saved = await settle(
      async () => (await sys.svc.redis.hget(sys.svc.keys.run(parked.runId), "resultOutput")) ?? false,
      { what: "the parked run's result saved on its record", timeoutMs: 10_000 },
    );
    expect(saved).toContain("sessions_list");
    expect(saved).not.toContain(secret);
    free();
    expect(await sys.rpc("agent.wait", { runId: parked.runId, timeoutMs: 20_000 })).toMatchObject({
      status: "ok",
      reply: `lookedlook it up${PAD}`,
    });
    const raw = readFileSync(join(disk, "agents", "main", "sessions", `${first.sessionId}.jsonl`), "utf8");
    expect(raw).not.toContain(secret);
    expect(raw.split("\n").filter((l) => l.includes(`"${parked.runId}:a"`))).toHaveLength(1);
  }, 60_000);
});

describe.skipIf(isRoot)("storage faults (non-root: unwritable directory in-process)", () => {
  it("turns parked on EACCES complete when the directory is writable again", async () => {
    const { dir: storage } = tempDir("sb-perm");
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage, faultRetryMaxDelayMs: 400 } }));
    cleanups.push(() => sys.close());
    const first = await inbound(sys, "u", "u hello");
    await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 });
    mkdirSync(join(storage, "agents"), { recursive: true });
    chmodTree(storage, 0o444, 0o555);
    const second = await inbound(sys, "u", "u m1");
    await settle(async () => (await readyStorage(sys.url)) === "unhealthy", {
      what: "/readyz saying storage is unhealthy",
      timeoutMs: 10_000,
    });
    chmodTree(storage, 0o644, 0o755);
    expect((await sys.rpc("agent.wait", { runId: second.runId, timeoutMs: 20_000 })).status).toBe("ok");
    expectWholeTranscript(sys, first.sessionId, ["u hello", "u m1"]);
  }, 60_000);
});

describe("a failed background fsync (group commit)", () => {
  it("marks storage unhealthy until the report expires; a turn that writes fine does not clear it", async () => {
    const { dir: storage } = tempDir("sb-syncfail");
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage } }));
    cleanups.push(() => sys.close());
    // As node:fs words it: the code, then the path (storage dir, agent id, sessionId).
    const message = `EIO: i/o error, fsync '${storage}/agents/main/sessions/s-0123456789abcdef.jsonl'`;
    await sys.svc.storageFaults.onBackgroundFault({ code: "EIO", message });
    const res = await fetch(`${sys.url}/readyz`);
    expect(res.status).toBe(200);
    // /readyz needs no token: the code only, once; the message stays for doctor and status.
    const body = await res.json();
    expect(body).toMatchObject({
      storage: "unhealthy",
      code: "EIO",
      warning: "transcript storage refuses writes (EIO): turns are queued and wait until it takes writes again",
    });
    expect(JSON.stringify(body)).not.toMatch(/sessions|s-0123456789abcdef|fsync|EIO: EIO/);
    expect(JSON.stringify(body)).not.toContain(storage);
    expect((await sys.rpc("status")).storage).toMatchObject({ healthy: false, code: "EIO", message });
    const run = await inbound(sys, "u", "u after");
    expect((await sys.rpc("agent.wait", { runId: run.runId, timeoutMs: 10_000 })).status).toBe("ok");
    expect(await readyStorage(sys.url)).toBe("unhealthy");
  });
});

describe("transcript paths that are not what they should be", () => {
  const sessionsDir = (sys: TestSystem) => join(sys.config.storage.dir, "agents", "main", "sessions");

  it("a sessions directory replaced by a file (ENOTDIR) parks turns; in order once it is back", async () => {
    const { dir: storage } = tempDir("sb-notdir");
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage, faultRetryMaxDelayMs: 400 } }));
    cleanups.push(() => sys.close());
    const first = await inbound(sys, "nd", "nd hello");
    expect((await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 })).status).toBe("ok");
    const dir = sessionsDir(sys);
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    const runIds = [];
    for (const t of ["nd 1", "nd 2", "nd 3"]) runIds.push((await inbound(sys, "nd", t)).runId);
    await settle(async () => (await readyStorage(sys.url)) === "unhealthy", {
      what: "/readyz saying storage is unhealthy (ENOTDIR)",
      timeoutMs: 10_000,
    });
    expect((await sys.get("/readyz")).body.warning).toMatch(/ENOTDIR/);
    // Parked, not given up after a few quick retries: nothing is dead-lettered meanwhile.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await sys.rpc("deadletters.list")).count).toBe(0);
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    for (const id of runIds) expect((await sys.rpc("agent.wait", { runId: id, timeoutMs: 20_000 })).status).toBe("ok");
    expectWholeTranscript(sys, first.sessionId, ["nd hello", "nd 1", "nd 2", "nd 3"]);
  }, 60_000);

  it("a transcript deleted under a busy session: later lines go to a new file, none to the deleted one", async () => {
    const { dir: storage } = tempDir("sb-deleted");
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage } }));
    cleanups.push(() => sys.close());
    const first = await inbound(sys, "del", "del hello");
    expect((await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 })).status).toBe("ok");
    const file = join(sessionsDir(sys), `${first.sessionId}.jsonl`);
    // Turns back to back (the writer keeps its handle open between them), the file deleted between two.
    const before = await inbound(sys, "del", "del before");
    expect((await sys.rpc("agent.wait", { runId: before.runId, timeoutMs: 10_000 })).status).toBe("ok");
    rmSync(file);
    for (const t of ["del after 1", "del after 2"]) {
      const r = await inbound(sys, "del", t);
      expect((await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 })).status).toBe("ok");
    }
    expectWholeTranscript(sys, first.sessionId, ["del after 1", "del after 2"]);
  }, 30_000);
});

describe("replaying a dead letter whose run saved its outcome", () => {
  it("writes the saved outcome and finishes the new run: the runtime and its tools do not run again", async () => {
    const { dir: storage } = tempDir("sb-replay-saved");
    const rules = [
      { when: { contains: "look it up" }, tools: [{ name: "sessions_list", args: {} }], reply: "found: {{text}}" },
      ...RULES,
    ];
    const sys = await startTestSystem(
      scriptConfig(rules, { storage: { dir: storage, faultRetryMaxDelayMs: 200, faultDeadlineMinutes: 0.02 } }),
    );
    cleanups.push(() => sys.close());
    // The workers run in this process: count the calls of the very runtime instance they use.
    const runtimeRuns = vi.spyOn(createRuntime(agentRuntime(sys.config, "main")), "run");
    const callsFor = (runId: string) => runtimeRuns.mock.calls.filter(([input]) => input.runId === runId).length;
    const first = await inbound(sys, "saved", "saved hello");
    expect((await sys.rpc("agent.wait", { runId: first.runId, timeoutMs: 10_000 })).status).toBe("ok");

    // The sessions directory replaced by a file: the turn runs, its transcript write fails (ENOTDIR) until the
    // deadline (1.2 s), and it is given up with its outcome saved.
    const dir = join(storage, "agents", "main", "sessions");
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    const doomed = await inbound(sys, "saved", "look it up");
    const failed = await sys.rpc("agent.wait", { runId: doomed.runId, timeoutMs: 15_000 });
    expect(failed).toMatchObject({ status: "error", error: expect.stringMatching(/ENOTDIR.*gave up/) });
    expect(callsFor(doomed.runId)).toBe(1);
    const letter = await sys.rpc("deadletters.get", { runId: doomed.runId });
    expect(letter).toMatchObject({ kind: "storage", result: { status: "ok", reply: "found: look it up" } });
    expect(letter.result.output).toContain("sessions_list");
    // Indexed by failure time in the same step as it was written.
    expect(Number(await sys.svc.redis.zscore(sys.svc.keys.deadLetterIndex(), doomed.runId))).toBe(letter.failedAt);

    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    const replay = await sys.rpc("deadletters.replay", { runId: doomed.runId });
    expect(replay.replayed[0]).toMatchObject({ runId: doomed.runId, reusedResult: true });
    const replayedAs = replay.replayed[0].replayedAs as string;
    expect(await sys.rpc("agent.wait", { runId: replayedAs, timeoutMs: 15_000 })).toMatchObject({
      status: "ok",
      reply: "found: look it up",
    });
    // Neither the model nor its tools ran for the replay: the lines are the saved outcome's.
    expect(callsFor(replayedAs)).toBe(0);
    expect(runtimeRuns).toHaveBeenCalledTimes(2);
    const lines = readTranscript(sys.config, first.sessionId).filter((l) => l.runId === replayedAs);
    expect(lines.map((l) => l.id)).toEqual(["u", "t0", "r0", "a"].map((s) => `${replayedAs}:${s}`));
    expect(lines.map((l) => textOf(l.message))).toEqual(["look it up", "", expect.any(String), "found: look it up"]);
    expect(readTranscript(sys.config, first.sessionId).some((l) => l.runId === doomed.runId)).toBe(false);
    // Delivered as a successful turn's reply is; the letter is gone.
    const delivered = await settle(
      async () =>
        (await deliveries(sys, { sessionKey: doomed.sessionKey })).find((d) => d.id === `reply-${replayedAs}`),
      { what: "the replayed run's reply delivered" },
    );
    expect(delivered).toMatchObject({ message: "found: look it up" });
    expect((await sys.rpc("deadletters.list")).count).toBe(0);
    expect(await sys.svc.redis.zcard(sys.svc.keys.deadLetterIndex())).toBe(0);
  }, 60_000);
});

/** Whether `chattr +i` works here (root on ext4 and the like; not on tmpfs or overlay). */
function immutableWorks(): boolean {
  const { dir, cleanup } = tempDir("sb-chattr");
  try {
    execFileSync("chattr", ["+i", dir], { stdio: "ignore" });
    execFileSync("chattr", ["-i", dir], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    cleanup();
  }
}

describe.skipIf(!isRoot || !immutableWorks())("an archive refused by storage (chattr +i)", () => {
  it("marks storage unhealthy while the archive job retries; it completes once storage is back", async () => {
    const { dir: storage } = tempDir("sb-archive-fault");
    const sys = await startTestSystem(scriptConfig(RULES, { storage: { dir: storage } }));
    const dir = join(storage, "agents", "main", "sessions");
    cleanups.push(() => sys.close());
    cleanups.push(() => execFileSync("chattr", ["-i", dir]));
    const r = await inbound(sys, "arch", "arch hello");
    expect((await sys.rpc("agent.wait", { runId: r.runId, timeoutMs: 10_000 })).status).toBe("ok");
    execFileSync("chattr", ["+i", dir]);
    expect((await sys.rpc("sessions.delete", { key: r.sessionKey })).deleted).toBe(true);
    await settle(async () => (await readyStorage(sys.url)) === "unhealthy", {
      what: "/readyz saying storage is unhealthy while the archive is refused",
      timeoutMs: 15_000,
    });
    // The code on /readyz (open to all); what failed, with its path, for status and doctor.
    expect((await sys.get("/readyz")).body).toMatchObject({ code: "EPERM", storage: "unhealthy" });
    expect((await sys.rpc("status")).storage.message).toMatch(/^archiving retired transcript \S+ failed: EPERM/);
    execFileSync("chattr", ["-i", dir]);
    await settle(async () => readdirSync(dir).some((f) => f.startsWith(`${r.sessionId}.jsonl.deleted.`)), {
      what: "the archived transcript",
      timeoutMs: 30_000,
    });
    expect(readdirSync(dir)).not.toContain(`${r.sessionId}.jsonl`);
  }, 60_000);
});
