/**
 * A reset or delete and the archive of the transcript it retired are two steps. The rotation
 * records the retired sessionId in the same script; whoever archives removes the record; the
 * maintenance sweep queues the archive of a record left behind (a crash between the steps).
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { waitRun } from "../helpers/api.js";
import { rotateSession } from "../../src/rotation/rotate.js";
import {
  PENDING_ARCHIVE_GRACE_MS,
  parsePendingArchive,
  pendingArchiveMember,
  requeuePendingArchives,
} from "../../src/rotation/pending-archives.js";

let sys: TestSystem;
beforeAll(async () => {
  sys = await startTestSystem({
    agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "ok: {{text}}" }] } }] },
  });
});
afterAll(async () => {
  await sys?.close();
});

const dir = () => join(sys.config.storage.dir, "agents", "main", "sessions");
const pending = async () => await sys.svc.redis.zrange(sys.svc.keys.pendingArchives(), 0, -1);
const archivedAs = (sessionId: string, kind: string) =>
  readdirSync(dir()).some((f) => f.startsWith(`${sessionId}.jsonl.${kind}.`));

/** A session with one answered message, so its transcript file exists. */
async function sessionWithTranscript(from: string) {
  const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from, text: "hello" });
  await waitRun(sys, r.body.runId, 10_000);
  const entry = (await sys.svc.sessions.get(r.body.sessionKey))!;
  expect(existsSync(join(dir(), `${entry.sessionId}.jsonl`))).toBe(true);
  return entry;
}

describe("pending archives", () => {
  it("a member names what the archive job needs, whatever the session key holds", () => {
    const d = { kind: "reset" as const, agentId: "main", sessionId: randomUUID(), sessionKey: "agent:main:x\ny:z" };
    expect(parsePendingArchive(pendingArchiveMember(d))).toEqual(d);
    expect(parsePendingArchive("bogus")).toBeUndefined();
  });

  it("a reset records the retired transcript with the rotation; its archive job removes the record", async () => {
    const entry = await sessionWithTranscript("recorded");
    await rotateSession(sys.svc, entry, { reason: "reset", archive: "job" });
    const member = pendingArchiveMember({
      kind: "reset",
      agentId: "main",
      sessionId: entry.sessionId,
      sessionKey: entry.key,
    });
    await settle(() => archivedAs(entry.sessionId, "reset"), { what: "the retired transcript archived" });
    await settle(async () => !(await pending()).includes(member), { what: "the record removed by the archive job" });
  });

  it("a reset whose archive was never queued (crash after the rotation) is archived by the sweep", async () => {
    const entry = await sessionWithTranscript("crashed-reset");
    // What rotateSession does before it queues the job: the rotation alone.
    await sys.svc.sessions.upsert(
      entry.key,
      { agentId: "main", kind: entry.kind },
      { sessionId: randomUUID(), previousSessionId: entry.sessionId },
      { expectSessionId: entry.sessionId, archiveRetired: true },
    );
    expect((await pending()).some((m) => m.includes(entry.sessionId))).toBe(true);
    // Within the grace period the sweep leaves it to the archive on its way.
    expect(await requeuePendingArchives(sys.svc, 100)).toBe(0);
    expect(await requeuePendingArchives(sys.svc, 100, Date.now() + PENDING_ARCHIVE_GRACE_MS + 1)).toBeGreaterThan(0);
    await settle(() => archivedAs(entry.sessionId, "reset"), { what: "the retired transcript archived" });
    expect(existsSync(join(dir(), `${entry.sessionId}.jsonl`))).toBe(false);
    await settle(async () => !(await pending()).some((m) => m.includes(entry.sessionId)), {
      what: "the record removed",
    });
  });

  it("a delete whose archive was never queued is archived as deleted by the sweep", async () => {
    const entry = await sessionWithTranscript("crashed-delete");
    await sys.svc.sessions.delete(entry.key, "main", entry.kind, { archive: true });
    expect(await requeuePendingArchives(sys.svc, 100, Date.now() + PENDING_ARCHIVE_GRACE_MS + 1)).toBeGreaterThan(0);
    await settle(() => archivedAs(entry.sessionId, "deleted"), { what: "the deleted transcript archived" });
    await settle(async () => !(await pending()).some((m) => m.includes(entry.sessionId)), {
      what: "the record removed",
    });
  });

  it("a /new whose turn was never queued (the push failed) still gets the transcript it retired archived", async () => {
    const entry = await sessionWithTranscript("push-failed");
    const inbox = sys.svc.inbox;
    const push = inbox.push.bind(inbox);
    inbox.push = async () => {
      throw new Error("connection lost before the push");
    };
    const msg = { channel: "tg", chatType: "dm", from: "push-failed", text: "/new", messageId: "m-1" };
    try {
      expect((await sys.post("/v1/inbound", msg)).status).toBeGreaterThanOrEqual(500);
    } finally {
      inbox.push = push;
    }
    // The channel retries: the session is already new, so the retry carries no archive.
    const retry = await sys.post("/v1/inbound", msg);
    expect(retry.status).toBe(202);
    expect(retry.body.sessionId).not.toBe(entry.sessionId);
    await waitRun(sys, retry.body.runId, 10_000);
    expect(existsSync(join(dir(), `${entry.sessionId}.jsonl`))).toBe(true);
    expect(await requeuePendingArchives(sys.svc, 100, Date.now() + PENDING_ARCHIVE_GRACE_MS + 1)).toBeGreaterThan(0);
    await settle(() => archivedAs(entry.sessionId, "reset"), { what: "the retired transcript archived" });
  });

  it("an isolated run's rotation records nothing: the previous run's transcript stays where it is", async () => {
    const entry = await sessionWithTranscript("isolated");
    await rotateSession(sys.svc, entry, { reason: "isolated", archive: "caller" });
    expect((await pending()).some((m) => m.includes(entry.sessionId))).toBe(false);
  });
});
