/**
 * The transcript store against a real Redis, real files and real child processes.
 * Each test gets its own storage dir; the file gets its own key prefix.
 */
import { execFile, spawn } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  InvalidAgentIdError,
  InvalidSessionIdError,
  StaleFenceError,
  SwitchboardError,
  ValidationError,
} from "../../src/errors/index.js";
import {
  archivePath,
  readAllEntries,
  readHeader,
  readTail,
  TranscriptStore,
  transcriptPath,
  type TranscriptEntry,
} from "../../src/transcript/index.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { newRedis, tempDir, testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { settle } from "../helpers/settle.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CHILD = join(ROOT, "test/fixtures/transcript-append-child.mjs");
const prefix = uniquePrefix("tx");
const redisKeys = new RedisKeys(prefix);

let redis: Redis;
let dir: string;
let cleanup: () => void;
let store: TranscriptStore;

function entry(id: string, text = `text ${id}`, extra: Partial<TranscriptEntry> = {}): TranscriptEntry {
  return {
    type: "message",
    id,
    parentId: null,
    timestamp: new Date().toISOString(),
    message: { role: "user", content: text, timestamp: Date.now() },
    ...extra,
  };
}

/** Every raw line of a file, each parsed (throws on an invalid line: the test wants to know). */
function rawLines(file: string): Record<string, unknown>[] {
  const text = readFileSync(file, "utf8");
  expect(text.endsWith("\n")).toBe(true);
  return text
    .slice(0, -1)
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

beforeAll(() => {
  redis = newRedis();
});

afterAll(async () => {
  await redis.quit();
});

beforeEach(() => {
  ({ dir, cleanup } = tempDir("sb-tx"));
  store = new TranscriptStore({ redis, keys: redisKeys, storageDir: dir });
});

afterEach(() => cleanup());

describe("paths", () => {
  it("builds the contract layout and archive names", () => {
    expect(transcriptPath(dir, "main", "sess-1")).toBe(join(resolve(dir), "agents/main/sessions/sess-1.jsonl"));
    expect(transcriptPath(dir, "main", "sess-1", "topic/a+b")).toBe(
      join(resolve(dir), "agents/main/sessions/sess-1-topic-topic%2Fa%2Bb.jsonl"),
    );
    expect(transcriptPath(dir, "main", "sess-1", 42)).toMatch(/sess-1-topic-42\.jsonl$/);
    expect(archivePath("/x/s.jsonl", "reset", new Date("2026-05-17T07:35:46.420Z"))).toBe(
      "/x/s.jsonl.reset.2026-05-17T07-35-46.420Z",
    );
    expect(archivePath("/x/s.jsonl", "deleted", Date.parse("2026-01-02T03:04:05.006Z"))).toBe(
      "/x/s.jsonl.deleted.2026-01-02T03-04-05.006Z",
    );
  });

  it("refuses unsafe ids with a typed error and creates nothing", async () => {
    const badSessions = ["../etc/passwd", "a/b", "a\\b", "A", ".hidden", "x".repeat(129), "", "/abs", "..", "a b"];
    for (const bad of badSessions) {
      expect(() => transcriptPath(dir, "main", bad), bad).toThrow(InvalidSessionIdError);
      await expect(store.ensure("main", bad), bad).rejects.toBeInstanceOf(InvalidSessionIdError);
      await expect(store.append("main", bad, [entry("e1")]), bad).rejects.toBeInstanceOf(InvalidSessionIdError);
      await expect(store.archive("main", bad, "reset"), bad).rejects.toBeInstanceOf(InvalidSessionIdError);
    }
    const badAgents = ["../etc", "a/b", "Main", ".x", "x".repeat(65), ""];
    for (const bad of badAgents) {
      expect(() => transcriptPath(dir, bad, "s1"), bad).toThrow(InvalidAgentIdError);
      await expect(store.append(bad, "s1", [entry("e1")]), bad).rejects.toBeInstanceOf(InvalidAgentIdError);
    }
    await expect(store.append("main", "s1", [entry("e1")], { topicId: "" })).rejects.toBeInstanceOf(ValidationError);
    await expect(store.append("main", "s1", [entry("e1")], { topicId: "t".repeat(250) })).rejects.toBeInstanceOf(
      ValidationError,
    );
    // Nothing reached the file system, and nothing reached Redis.
    expect(readdirSync(dir)).toEqual([]);
    expect(await redis.keys(`${redisKeys.base}:*:s1*`)).toEqual([]);
    // A 128-char id is the longest accepted; a hostile topic id is encoded, never a separator.
    expect(() => transcriptPath(dir, "main", "x".repeat(128))).not.toThrow();
    const topicFile = transcriptPath(dir, "main", "s1", "../../../etc/passwd");
    expect(relative(join(dir, "agents/main/sessions"), topicFile)).toBe("s1-topic-..%2F..%2F..%2Fetc%2Fpasswd.jsonl");
  });
});

describe("TranscriptStore", () => {
  it("writes the header once, appends in order and tails the last N", async () => {
    const ensured = await Promise.all(Array.from({ length: 10 }, () => store.ensure("main", "s-basic")));
    expect(ensured.filter((e) => e.created)).toHaveLength(1);
    const file = store.path("main", "s-basic");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const header = await readHeader(file);
    expect(header).toMatchObject({ type: "session", version: 3, id: "s-basic" });
    expect(Number.isNaN(Date.parse(header!.timestamp))).toBe(false);

    const ids = Array.from({ length: 25 }, (_, i) => `m${i}`);
    expect(
      await store.append(
        "main",
        "s-basic",
        ids.slice(0, 10).map((id) => entry(id)),
      ),
    ).toEqual({ written: 10, skipped: 0 });
    for (const id of ids.slice(10)) await store.append("main", "s-basic", [entry(id)]);
    await store.append("main", "s-basic", [entry("tool1", "x", { type: "custom", message: undefined })]);

    const lines = rawLines(file);
    expect(lines[0]).toMatchObject({ type: "session", id: "s-basic" });
    expect(lines.filter((l) => l.type === "session")).toHaveLength(1);
    expect(lines.slice(1).map((l) => l.id)).toEqual([...ids, "tool1"]);
    expect((await readAllEntries(file)).map((e) => e.id)).toEqual([...ids, "tool1"]);

    expect((await store.tail("main", "s-basic", 3)).map((e) => e.id)).toEqual(["m23", "m24", "tool1"]);
    expect((await store.tail("main", "s-basic", 1000)).map((e) => e.id)).toEqual([...ids, "tool1"]);
    const msgs = await store.messages("main", "s-basic", 2);
    expect(msgs).toEqual([
      expect.objectContaining({ role: "user", content: "text m23" }),
      expect.objectContaining({ role: "user", content: "text m24" }),
    ]);
    expect(await store.tail("main", "no-such-session", 5)).toEqual([]);
    expect(await store.messages("main", "no-such-session", 5)).toEqual([]);
    expect(await store.hasEntry("s-basic", "m7")).toBe(true);
    expect(await store.hasEntry("s-basic", "nope")).toBe(false);
  });

  it("keeps topic transcripts apart from the main one", async () => {
    await store.append("main", "s-top", [entry("a")]);
    await store.append("main", "s-top", [entry("a"), entry("b")], { topicId: "99" });
    expect((await store.tail("main", "s-top", 10)).map((e) => e.id)).toEqual(["a"]);
    expect((await store.tail("main", "s-top", 10, { topicId: "99" })).map((e) => e.id)).toEqual(["a", "b"]);
    expect(await readHeader(store.path("main", "s-top", "99"))).toMatchObject({ id: "s-top" });
    expect(await store.hasEntry("s-top", "b")).toBe(false);
    expect(await store.hasEntry("s-top", "b", { topicId: "99" })).toBe(true);
  });

  it("tail reads a bounded number of bytes from a large file", async () => {
    const file = store.path("main", "s-big");
    const N = 20_000;
    for (let b = 0; b < N; b += 2000) {
      const batch = Array.from({ length: 2000 }, (_, i) => entry(`big-${b + i}`, `line ${b + i} ${"ü€🙂".repeat(20)}`));
      expect((await store.append("main", "s-big", batch)).written).toBe(2000);
    }
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(3_000_000);

    const t0 = performance.now();
    const r = await readTail(file, 10);
    const ms = performance.now() - t0;
    expect(r.entries.map((e) => e.id)).toEqual(Array.from({ length: 10 }, (_, i) => `big-${N - 10 + i}`));
    expect(r.fileSize).toBe(size);
    // One 64 KiB chunk holds the last 10 lines: the read cost does not depend on the file.
    expect(r.bytesRead).toBeLessThanOrEqual(64 * 1024);
    expect(r.bytesRead).toBeLessThan(size / 40);
    const r1000 = await readTail(file, 1000);
    expect(r1000.entries).toHaveLength(1000);
    expect(r1000.entries[0]!.id).toBe(`big-${N - 1000}`);
    expect(r1000.bytesRead).toBeLessThan(size / 10);
    console.log(
      `[transcript] file ${size} bytes / ${N} lines: tail(10) read ${r.bytesRead} bytes in ${ms.toFixed(2)} ms; ` +
        `tail(1000) read ${r1000.bytesRead} bytes`,
    );

    // Tiny chunks (cutting lines and multi-byte characters everywhere) give the same answer.
    const small = await readTail(file, 7, { chunkSize: 5 });
    expect(small.entries).toEqual(r.entries.slice(3));
  });

  it("the readers skip the header, garbage, torn and duplicated lines", async () => {
    const file = join(dir, "manual.jsonl");
    const e = (id: string) => JSON.stringify(entry(id, `ü ${id}`));
    writeFileSync(
      file,
      `${[
        JSON.stringify({ type: "session", version: 3, id: "manual", timestamp: new Date().toISOString() }),
        e("a"),
        "not json",
        "",
        e("b"),
        '{"type":"message","id":"torn","mess',
        e("a"), // duplicated line
        "[1,2]",
        '{"type":"message"}', // no id
        e("c"),
      ].join("\n")}\n`,
    );
    expect((await readAllEntries(file)).map((x) => x.id)).toEqual(["a", "b", "c"]);
    for (const chunkSize of [1, 3, 17, 64 * 1024]) {
      expect(
        (await readTail(file, 10, { chunkSize })).entries.map((x) => x.id),
        `chunk ${chunkSize}`,
      ).toEqual(["b", "a", "c"]);
      expect((await readTail(file, 1, { chunkSize })).entries.map((x) => x.id)).toEqual(["c"]);
    }
    // An unterminated last line counts only when it is a whole object.
    appendFileSync(file, e("d"));
    expect((await readTail(file, 1)).entries.map((x) => x.id)).toEqual(["d"]);
    appendFileSync(file, `\n${e("f").slice(0, 30)}`);
    expect((await readTail(file, 1)).entries.map((x) => x.id)).toEqual(["d"]);
    expect((await readAllEntries(file)).map((x) => x.id)).toEqual(["a", "b", "c", "d"]);
    expect(await readTail(join(dir, "missing.jsonl"), 5)).toEqual({ entries: [], bytesRead: 0, fileSize: 0 });
    expect(await readHeader(join(dir, "missing.jsonl"))).toBeUndefined();
  });

  it("is idempotent on entry id: repeats, in-batch duplicates, lost index", async () => {
    const file = store.path("main", "s-idem");
    expect(await store.append("main", "s-idem", [entry("x1")])).toEqual({ written: 1, skipped: 0 });
    expect(await store.append("main", "s-idem", [entry("x1", "retry")])).toEqual({ written: 0, skipped: 1 });
    expect(await store.append("main", "s-idem", [entry("x2"), entry("x2"), entry("x1"), entry("x3")])).toEqual({
      written: 2,
      skipped: 2,
    });
    // Redis index lost (flush, failover without persistence): rebuilt from the file.
    const keys = store.keys("s-idem");
    expect(await redis.del(keys.index, keys.ids)).toBe(2);
    expect(await store.append("main", "s-idem", [entry("x3"), entry("x4"), entry("x1")])).toEqual({
      written: 1,
      skipped: 2,
    });
    expect(rawLines(file).map((l) => l.id)).toEqual(["s-idem", "x1", "x2", "x3", "x4"]);
    expect(await redis.hget(keys.index, "size")).toBe(String(statSync(file).size));
    await expect(
      store.append("main", "s-idem", [{ type: "message" } as unknown as TranscriptEntry]),
    ).rejects.toBeInstanceOf(ValidationError);
    expect(await store.append("main", "s-idem", [])).toEqual({ written: 0, skipped: 0 });
  });

  it("reconciles lines written behind the index (crash after write, before indexing)", async () => {
    const file = store.path("main", "s-crash");
    await store.append("main", "s-crash", [entry("c1")]);
    const keys = store.keys("s-crash");
    const indexedBefore = Number(await redis.hget(keys.index, "size"));
    // A writer wrote c2 and died before SADD/HSET.
    appendFileSync(file, `${JSON.stringify(entry("c2"))}\n`);
    expect(await store.hasEntry("s-crash", "c2")).toBe(false);
    expect(await store.append("main", "s-crash", [entry("c2", "retried"), entry("c3")])).toEqual({
      written: 1,
      skipped: 1,
    });
    expect(rawLines(file).map((l) => l.id)).toEqual(["s-crash", "c1", "c2", "c3"]);
    expect(await store.hasEntry("s-crash", "c2")).toBe(true);
    expect(Number(await redis.hget(keys.index, "size"))).toBeGreaterThan(indexedBefore);

    // Only the unindexed tail was read: same answer with a nothing-to-write append.
    appendFileSync(file, `${JSON.stringify(entry("c4"))}\n`);
    expect(await store.append("main", "s-crash", [entry("c4")])).toEqual({ written: 0, skipped: 1 });
    expect(await redis.hget(keys.index, "size")).toBe(String(statSync(file).size));

    // A torn write (died mid-line): readers skip the fragment, the next append closes it off
    // with a newline (never cuts: it may be a write still going in) and writes c5 whole.
    const beforeTear = statSync(file).size;
    appendFileSync(file, JSON.stringify(entry("c5")).slice(0, 30)); // `{"type":"message","id":"c5","p`
    expect((await readAllEntries(file)).map((e) => e.id)).toEqual(["c1", "c2", "c3", "c4"]);
    expect((await store.tail("main", "s-crash", 10)).map((e) => e.id)).toEqual(["c1", "c2", "c3", "c4"]);
    expect(await store.append("main", "s-crash", [entry("c5"), entry("c6")])).toEqual({ written: 2, skipped: 0 });
    expect((await readAllEntries(file)).map((e) => e.id)).toEqual(["c1", "c2", "c3", "c4", "c5", "c6"]);
    const text = readFileSync(file, "utf8");
    expect(text.endsWith("\n")).toBe(true);
    expect(text.split("\n").filter((l) => l.includes('"c5"'))).toHaveLength(2); // the fragment, then c5 whole
    expect(text.split("\n").filter((l) => l !== "" && !l.endsWith("}"))).toEqual(['{"type":"message","id":"c5","p']);
    expect(statSync(file).size).toBeGreaterThan(beforeTear);
  });

  it("keeps the index only indexTtlMs past its last append, then rebuilds it from the file", async () => {
    // An import's index stayed for good (2,000 sessions of 200 lines: +26.6 MB of Redis).
    const ttlStore = new TranscriptStore({ redis, keys: redisKeys, storageDir: dir, indexTtlMs: 1500 });
    const file = ttlStore.path("main", "s-ttl");
    const keys = ttlStore.keys("s-ttl");
    const ttls = async () => [await redis.pttl(keys.index), await redis.pttl(keys.ids)];
    expect(await ttlStore.append("main", "s-ttl", [entry("t1"), entry("t2")])).toEqual({ written: 2, skipped: 0 });
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(0);
    for (const ttl of await ttls()) expect(ttl).toBeLessThanOrEqual(1500);
    // Every append keeps it alive, also one that writes nothing.
    await sleep(700);
    expect(await ttlStore.append("main", "s-ttl", [entry("t2")])).toEqual({ written: 0, skipped: 1 });
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(1000);
    await settle(async () => (await redis.exists(keys.index, keys.ids)) === 0, { what: "the index expired" });
    // Gone from Redis, not from the file: the next append finds t1 there and writes only t3.
    expect(await ttlStore.append("main", "s-ttl", [entry("t1"), entry("t3")])).toEqual({ written: 1, skipped: 1 });
    expect(rawLines(file).map((l) => l.id)).toEqual(["s-ttl", "t1", "t2", "t3"]);
    expect(await redis.hget(keys.index, "size")).toBe(String(statSync(file).size));
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(0);
  });

  it("an index an older version left without a TTL gets it when read or opened, not only on an append", async () => {
    const ttlStore = new TranscriptStore({ redis, keys: redisKeys, storageDir: dir, indexTtlMs: 60_000 });
    const keys = ttlStore.keys("s-old");
    const ttls = async () => [await redis.pttl(keys.index), await redis.pttl(keys.ids)];
    await ttlStore.append("main", "s-old", [entry("o1"), entry("o2")]);
    // As an older version left it: no expiry on either key (-1).
    const persisted = async () => {
      await redis.persist(keys.index);
      await redis.persist(keys.ids);
      expect(await ttls()).toEqual([-1, -1]);
    };
    await persisted();
    // An import's dry run reads it (never takes the lock nor writes): it used to stay for good.
    expect(await ttlStore.present("main", "s-old", ["o1", "o3"])).toEqual([true, false]);
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(50_000);
    // A writer opening it (an append that writes nothing, all its lines there).
    await persisted();
    expect(await ttlStore.append("main", "s-old", [entry("o2")])).toEqual({ written: 0, skipped: 1 });
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(50_000);
    // Read as it was: nothing else changed.
    expect(await redis.hget(keys.index, "size")).toBe(String(statSync(ttlStore.path("main", "s-old")).size));
    expect((await redis.smembers(keys.ids)).sort()).toEqual(["o1", "o2"]);
  });

  it("a commit moves the index only from the size its append read (an index reset meanwhile stays)", async () => {
    await store.append("main", "s-cas", [entry("k1")]);
    const keys = store.keys("s-cas");
    const size = Number(await redis.hget(keys.index, "size"));
    await redis.set(keys.lock, "tok", "PX", 10_000);
    const commit = (store as unknown as { commit: (k: string[], a: (string | number)[]) => Promise<unknown> }).commit;
    const rel = "agents/main/sessions/s-cas.jsonl";
    // The index expired and was started over by someone else: this append's read size is not it.
    await redis.hset(keys.index, "size", 0);
    expect(await commit([keys.lock, keys.index, keys.ids], ["tok", size + 100, rel, size, 60_000, "k2"])).toBe(0);
    expect(await redis.hget(keys.index, "size")).toBe("0");
    // Still the size it read: moved.
    expect(await commit([keys.lock, keys.index, keys.ids], ["tok", size + 100, rel, 0, 60_000, "k2"])).toBe(1);
    expect(await redis.hget(keys.index, "size")).toBe(String(size + 100));
    await redis.del(keys.lock);
  });

  it("present() answers from the index, from the file past it, and from the file once the index is gone", async () => {
    const file = store.path("main", "s-pres");
    const keys = store.keys("s-pres");
    expect(await store.present("main", "s-pres", ["p1"])).toEqual([false]);
    await store.append("main", "s-pres", [entry("p1"), entry("p2")]);
    // A lease holder's turn: in the file, past the index.
    appendFileSync(file, `${JSON.stringify(entry("p3"))}\n`);
    const ask = ["p1", "p3", "nope", "p1"];
    expect(await store.present("main", "s-pres", ask)).toEqual([true, true, false, true]);
    // Expired (or flushed): the file answers, and nothing is written to Redis.
    await redis.del(keys.index, keys.ids);
    expect(await store.present("main", "s-pres", ask)).toEqual([true, true, false, true]);
    expect(await redis.exists(keys.index, keys.ids)).toBe(0);
  });

  it("keeps two agents' transcripts with the same sessionId apart", async () => {
    await store.append("alpha", "s-shared", [entry("k1"), entry("k2")]);
    expect(await store.append("beta", "s-shared", [entry("k1")])).toEqual({ written: 1, skipped: 0 });
    expect(await store.append("alpha", "s-shared", [entry("k2"), entry("k3")])).toEqual({ written: 1, skipped: 1 });
    expect((await readAllEntries(store.path("alpha", "s-shared"))).map((e) => e.id)).toEqual(["k1", "k2", "k3"]);
    expect((await readAllEntries(store.path("beta", "s-shared"))).map((e) => e.id)).toEqual(["k1"]);
  });

  it("refuses a stale fence and writes nothing", async () => {
    const fenceKey = redisKeys.fence("s-fence");
    await redis.set(fenceKey, "5");
    await store.append("main", "s-fence", [entry("f1")], { fence: { key: fenceKey, token: 5 } });
    const file = store.path("main", "s-fence");
    const before = readFileSync(file, "utf8");

    const err = await store
      .append("main", "s-fence", [entry("f2")], { fence: { key: fenceKey, token: 4 } })
      .catch((e) => e);
    expect(err).toBeInstanceOf(StaleFenceError);
    expect((err as SwitchboardError).code).toBe("stale_fence");
    expect((err as SwitchboardError).details).toMatchObject({ token: 4, current: 5 });
    await redis.del(fenceKey);
    await expect(
      store.append("main", "s-fence", [entry("f2")], { fence: { key: fenceKey, token: 5 } }),
    ).rejects.toBeInstanceOf(StaleFenceError);
    expect(readFileSync(file, "utf8")).toBe(before);
    expect(await store.hasEntry("s-fence", "f2")).toBe(false);
    // A stale writer does not even create a missing transcript.
    await expect(
      store.append("main", "s-fence-new", [entry("n1")], { fence: { key: fenceKey, token: 5 } }),
    ).rejects.toBeInstanceOf(StaleFenceError);
    expect(existsSync(store.path("main", "s-fence-new"))).toBe(false);
    // The lock was released on the error path: the new holder writes at once.
    await redis.set(fenceKey, "6");
    expect(await store.append("main", "s-fence", [entry("f2")], { fence: { key: fenceKey, token: 6 } })).toEqual({
      written: 1,
      skipped: 0,
    });
  });

  it("gives up with TranscriptLockError when the lock stays held, leaving the queue clean", async () => {
    const impatient = new TranscriptStore({ redis, keys: redisKeys, storageDir: dir, lockWaitMs: 300 });
    const keys = impatient.keys("s-locked");
    await redis.set(keys.lock, "someone-else", "PX", 5000);
    const t0 = Date.now();
    const err = await impatient.append("main", "s-locked", [entry("z1")]).catch((e) => e);
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("transcript_locked");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(existsSync(impatient.path("main", "s-locked"))).toBe(false);
    expect(await redis.zcard(keys.queue)).toBe(0);
    // Released: the next append goes through, and the foreign lock was never touched.
    expect(await redis.get(keys.lock)).toBe("someone-else");
    await redis.del(keys.lock);
    expect(await impatient.append("main", "s-locked", [entry("z1")])).toEqual({ written: 1, skipped: 0 });
    expect(await redis.exists(keys.lock)).toBe(0);
  });

  it("archives to .reset/.deleted and starts fresh afterwards", async () => {
    const file = store.path("main", "s-arch");
    await store.append("main", "s-arch", [entry("a1"), entry("a2")]);
    const when = new Date("2026-05-17T07:35:46.420Z");
    const archived = await store.archive("main", "s-arch", "reset", when);
    expect(archived).toBe(`${file}.reset.2026-05-17T07-35-46.420Z`);
    expect(existsSync(file)).toBe(false);
    expect((await readAllEntries(archived!)).map((e) => e.id)).toEqual(["a1", "a2"]);
    const keys = store.keys("s-arch");
    expect(await redis.exists(keys.index, keys.ids)).toBe(0);
    expect(await store.hasEntry("s-arch", "a1")).toBe(false);

    // Same id again: a fresh file and index, so a1 is written anew.
    expect((await store.ensure("main", "s-arch")).created).toBe(true);
    expect(await store.append("main", "s-arch", [entry("a1"), entry("a3")])).toEqual({ written: 2, skipped: 0 });
    expect(rawLines(file).map((l) => l.id)).toEqual(["s-arch", "a1", "a3"]);

    // Same timestamp twice never overwrites an archive.
    const again = await store.archive("main", "s-arch", "reset", when);
    expect(again).toBe(`${file}.reset.2026-05-17T07-35-46.421Z`);
    await store.append("main", "s-arch", [entry("a9")]);
    const deleted = await store.archive("main", "s-arch", "deleted");
    expect(deleted).toMatch(/s-arch\.jsonl\.deleted\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z$/);
    expect(await store.archive("main", "s-arch", "deleted")).toBeUndefined();
    expect(readdirSync(join(dir, "agents/main/sessions")).sort()).toHaveLength(3);
  });

  it("serialises concurrent appends within one process and across connections", async () => {
    const redis2 = newRedis();
    try {
      const other = new TranscriptStore({ redis: redis2, keys: redisKeys, storageDir: dir });
      const jobs: Promise<unknown>[] = [];
      for (let i = 0; i < 200; i++) {
        const s = i % 2 === 0 ? store : other;
        jobs.push(s.append("main", "s-inproc", [entry(`p${i % 100}`), entry(`q${(i * 7) % 100}`)]));
      }
      await Promise.all(jobs);
      const ids = rawLines(store.path("main", "s-inproc"))
        .slice(1)
        .map((l) => l.id as string);
      expect(ids).toHaveLength(200);
      expect(new Set(ids).size).toBe(200);
    } finally {
      await redis2.quit();
    }
  });

  it("measures append latency", async () => {
    const lat: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await store.append("main", "s-lat", [entry(`l${i}`)]);
      lat.push(performance.now() - t0);
    }
    const t0 = performance.now();
    const dup = await store.append("main", "s-lat", [entry("l5")]);
    const dupMs = performance.now() - t0;
    expect(dup).toEqual({ written: 0, skipped: 1 });
    lat.sort((a, b) => a - b);
    const pct = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]!.toFixed(2);
    console.log(
      `[transcript] single-entry append (lock + reconcile check + write + fsync + commit): ` +
        `p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms; duplicate append ${dupMs.toFixed(2)} ms`,
    );
    expect((await readAllEntries(store.path("main", "s-lat"))).length).toBe(200);
  });
});

describe("TranscriptStore across processes", () => {
  // The children import the COMPILED store. It is compiled here into a private directory
  // (only src/transcript, the key layout, and what they import) so this file neither depends on nor races with
  // other builds of dist/ that may run at the same time.
  const buildDir = join(ROOT, "dist", ".test-builds", `transcript-${process.pid}-${uniquePrefix("b")}`);
  const modulePath = join(buildDir, "src/transcript/index.js");

  beforeAll(async () => {
    mkdirSync(buildDir, { recursive: true });
    const tsconfig = join(buildDir, "tsconfig.json");
    writeFileSync(
      tsconfig,
      JSON.stringify({
        extends: join(ROOT, "tsconfig.json"),
        compilerOptions: { outDir: buildDir, rootDir: ROOT, declaration: false, sourceMap: false, incremental: false },
        files: [join(ROOT, "src/transcript/index.ts"), join(ROOT, "src/storage/redis-keys.ts")],
        include: [],
      }),
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const out = await promisify(execFile)(process.execPath, [tsc, "-p", tsconfig]).catch((e: { stdout?: string }) => e);
    if (!existsSync(modulePath)) throw new Error(`build of the transcript store failed:\n${String(out.stdout ?? "")}`);
    cpSync(join(ROOT, "src/transcript/lua"), join(buildDir, "src/transcript/lua"), { recursive: true });
  }, 120_000);

  afterAll(() => {
    rmSync(buildDir, { recursive: true, force: true });
  });

  function runChild(args: Record<string, unknown>): Promise<{ written: number; skipped: number; created: boolean }> {
    return new Promise((resolveChild, reject) => {
      const child = spawn(process.execPath, [CHILD, JSON.stringify(args)], { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("error", reject);
      child.on("exit", (code) => {
        if (code !== 0) return reject(new Error(`child ${String(args.child)} exited ${code}: ${stderr}`));
        resolveChild(JSON.parse(stdout.trim()) as { written: number; skipped: number; created: boolean });
      });
    });
  }

  it("4 processes appending overlapping ids write each id exactly once", async () => {
    const children = 4;
    const perChild = 300;
    const total = 600; // child i writes [150 i, 150 i + 300): every id is written by 2 processes
    const startAt = Date.now() + 1500; // let every child start and connect first
    const t0 = Date.now();
    const results = await Promise.all(
      Array.from({ length: children }, (_, child) =>
        runChild({
          modulePath,
          redisUrl: testRedisUrl(),
          prefix,
          storageDir: dir,
          agentId: "main",
          sessionId: "s-multi",
          child,
          from: child * 150,
          count: perChild,
          total,
          startAt,
        }),
      ),
    );
    const elapsed = Date.now() - t0 - 1500;

    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(results.reduce((n, r) => n + r.written, 0)).toBe(total);
    expect(results.reduce((n, r) => n + r.skipped, 0)).toBe(children * perChild - total);

    const lines = rawLines(store.path("main", "s-multi")); // every line is valid JSON
    expect(lines[0]).toMatchObject({ type: "session", id: "s-multi" });
    expect(lines.filter((l) => l.type === "session")).toHaveLength(1);
    const ids = lines.slice(1).map((l) => l.id as string);
    expect(ids).toHaveLength(total);
    expect(new Set(ids)).toEqual(new Set(Array.from({ length: total }, (_, n) => `e-${n}`)));
    expect(await redis.scard(store.keys("s-multi").ids)).toBe(total);
    // How often the writer changes along the file: > 3 means the processes really interleaved.
    const writers = lines.slice(1).map((l) => /from child (\d)/.exec(JSON.stringify(l))![1]);
    const switches = writers.filter((w, i) => i > 0 && w !== writers[i - 1]).length;
    expect(switches).toBeGreaterThanOrEqual(10);
    console.log(
      `[transcript] ${children} processes x ${perChild} entries (${total} unique) in ~${elapsed} ms ` +
        `(incl. process start); written per child: ${results.map((r) => r.written).join(", ")}; ` +
        `writer switches ${switches}`,
    );
  }, 120_000);
});
