/**
 * Listing dead letters pages through their index by failure time (zset runId → failedAt, written
 * with each letter and removed with it) instead of reading the whole hash: `deadletters.list`
 * with `limit` answers one page and a `nextCursor`, in order, also while letters are replayed,
 * discarded or added between pages. Letters written before the index existed are indexed by the
 * first listing that finds them, and listed like the others. Without `limit` it answers every
 * letter, as it did before paging.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, writeConfigFile, type TestSystem } from "../helpers/system.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import type { DeadLetter } from "../../src/runs/dead-letters.js";
import { deadLetter, writeIndexed as writeLetter } from "../fixtures/dead-letter-support.js";

let sys: TestSystem;
let redis: PrivateRedis;

beforeAll(async () => {
  // Its own Redis and no workers: nothing else reads it while a listing's traffic is measured
  // (the server's count of bytes sent counts every client's).
  redis = await startPrivateRedis();
  sys = await startTestSystem(
    {
      redis: { url: redis.url },
      // Sessions under `quiet` may not be created by a send (the replay test below).
      session: { sendPolicy: { rules: [{ action: "deny", match: { keyPrefix: "quiet" } }] } },
    },
    { gateway: true, workers: false },
  );
});

afterAll(async () => {
  await sys?.close();
  await redis?.cleanup();
});

const hash = () => sys.svc.keys.deadLetters();
const index = () => sys.svc.keys.deadLetterIndex();

const letter = (runId: string, failedAt: number, text?: string) =>
  deadLetter(runId, failedAt, "agent:main:letters", text);

const writeIndexed = (l: DeadLetter) => writeLetter(sys.svc, l);

/** Written as a version without the index wrote it: the hash only. */
async function writeLegacy(l: DeadLetter): Promise<void> {
  await sys.svc.redis.hset(hash(), l.runId, JSON.stringify(l));
}

async function clear(): Promise<void> {
  await sys.svc.redis.del(hash(), index());
}

/** Oldest first: failure time, then runId by its bytes (as Redis orders equal scores). */
function ordered(letters: DeadLetter[]): string[] {
  return [...letters]
    .sort((a, b) => a.failedAt - b.failedAt || Buffer.compare(Buffer.from(a.runId), Buffer.from(b.runId)))
    .map((l) => l.runId);
}

/** Every page of `deadletters.list` with `limit`, following nextCursor to the end. */
async function pages(limit: number, between: (page: number) => Promise<void> = async () => {}) {
  const out: { ids: string[]; count: number }[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const res = await sys.rpc("deadletters.list", { limit, ...(cursor ? { cursor } : {}) });
    expect(res.deadLetters.length).toBeLessThanOrEqual(limit);
    out.push({ ids: (res.deadLetters as DeadLetter[]).map((l) => l.runId), count: res.count });
    cursor = res.nextCursor;
    if (!cursor) return out;
    await between(i);
  }
  throw new Error("the listing never ended");
}

describe("deadletters.list pages through the index by failure time", () => {
  it("in order with a cursor; letters from before the index are indexed by the first listing and listed", async () => {
    await clear();
    const all: DeadLetter[] = [];
    // Ties on purpose: equal failure times are ordered by runId, across page boundaries too.
    for (let i = 0; i < 60; i++) all.push(letter(`dl-${(i * 37) % 60}`, 1_700_000_000_000 + (i % 17)));
    for (const [i, l] of all.entries()) await (i % 2 ? writeIndexed(l) : writeLegacy(l));
    expect(await sys.svc.redis.zcard(index())).toBe(30);

    const listed = await pages(7);
    expect(listed.flatMap((p) => p.ids)).toEqual(ordered(all));
    expect(listed).toHaveLength(Math.ceil(60 / 7));
    for (const p of listed) expect(p.count).toBe(60); // every letter there is, not the page's
    expect(await sys.svc.redis.zcard(index())).toBe(60);

    // Without limit: every letter, as before paging, and no cursor.
    const whole = await sys.rpc("deadletters.list");
    expect(whole.count).toBe(60);
    expect((whole.deadLetters as DeadLetter[]).map((l) => l.runId)).toEqual(ordered(all));
    expect(whole).not.toHaveProperty("nextCursor");
  });

  it("a cursor keeps its place while letters are replayed, discarded or added between pages", async () => {
    await clear();
    const all = Array.from({ length: 20 }, (_, i) => letter(`run-${String(i).padStart(2, "0")}`, 1_000 + i));
    for (const l of all) await writeIndexed(l);
    const seen: string[] = [];
    let cursor: string | undefined;
    const first = await sys.rpc("deadletters.list", { limit: 5 });
    seen.push(...(first.deadLetters as DeadLetter[]).map((l) => l.runId));
    cursor = first.nextCursor;
    expect(seen).toEqual(all.slice(0, 5).map((l) => l.runId));

    // Gone between pages: one already listed, the next one due; added: one before the cursor, one after.
    expect(await sys.svc.deadLetters.discard("run-00")).toBe(true);
    expect(await sys.rpc("deadletters.discard", { runId: "run-05" })).toMatchObject({ discarded: true });
    await writeIndexed(letter("run-early", 1_002));
    await writeIndexed(letter("run-late", 5_000));
    expect(await sys.svc.redis.zscore(index(), "run-00")).toBeNull();
    while (cursor) {
      const res = await sys.rpc("deadletters.list", { limit: 5, cursor });
      seen.push(...(res.deadLetters as DeadLetter[]).map((l) => l.runId));
      cursor = res.nextCursor;
    }
    expect(seen).toEqual([...all.slice(0, 5), ...all.slice(6)].map((l) => l.runId).concat("run-late"));
  });

  it("an index entry whose letter is gone is skipped and dropped", async () => {
    await clear();
    await writeIndexed(letter("kept-1", 10));
    await sys.svc.redis.zadd(index(), 20, "gone"); // its letter removed by a process that did not know the index
    await writeIndexed(letter("kept-2", 30));
    const res = await sys.rpc("deadletters.list", { limit: 2 });
    expect((res.deadLetters as DeadLetter[]).map((l) => l.runId)).toEqual(["kept-1", "kept-2"]);
    expect(res).not.toHaveProperty("nextCursor");
    expect(await sys.svc.redis.zrange(index(), 0, -1)).toEqual(["kept-1", "kept-2"]);
  });

  it("rolling upgrade: a stale index entry and an unindexed letter of equal count are both reconciled", async () => {
    // A written with its index entry, then removed by an older process (HDEL only); B written by an
    // older process (HSET only). HLEN == ZCARD, so counting alone cannot tell B is missing.
    const seed = async () => {
      await clear();
      await writeIndexed(letter("up-a", 1_000));
      await sys.svc.redis.hdel(hash(), "up-a");
      await writeLegacy(letter("up-b", 500)); // before A: a listing must not pass it by
      await writeIndexed(letter("up-c", 2_000));
      expect(await sys.svc.redis.hlen(hash())).toBe(await sys.svc.redis.zcard(index()));
    };

    await seed();
    const whole = await sys.svc.deadLetters.page();
    expect(whole.total).toBe(2);
    expect(whole.letters.map((l) => l.runId)).toEqual(["up-b", "up-c"]);
    expect(await sys.svc.redis.zrange(index(), 0, -1)).toEqual(["up-b", "up-c"]);

    await seed();
    const first = await sys.rpc("deadletters.list", { limit: 1 });
    expect((first.deadLetters as DeadLetter[]).map((l) => l.runId)).toEqual(["up-b"]);
    const second = await sys.rpc("deadletters.list", { limit: 1, cursor: first.nextCursor });
    expect((second.deadLetters as DeadLetter[]).map((l) => l.runId)).toEqual(["up-c"]);
    expect(second).not.toHaveProperty("nextCursor");

    await seed();
    expect(await sys.svc.deadLetters.runIds()).toEqual(["up-b", "up-c"]);
    expect(await sys.svc.redis.zrange(index(), 0, -1)).toEqual(["up-b", "up-c"]);

    await seed();
    const replayed = await sys.rpc("deadletters.replay", { all: true });
    expect((replayed.replayed as { runId: string }[]).map((r) => r.runId)).toEqual(["up-b", "up-c"]);
    expect(await sys.svc.deadLetters.count()).toBe(0);
    expect(await sys.svc.redis.zcard(index())).toBe(0);
  });

  it("replay --all leaves a letter whose session may not be made again, and replays the others", async () => {
    await clear();
    // Neither session exists: `quiet:` may not be created (send policy), `loud:` may.
    await writeIndexed(deadLetter("q-1", 3_000, "agent:main:quiet:one"));
    await writeIndexed(deadLetter("l-1", 3_001, "agent:main:loud:one"));
    const res = await sys.rpc("deadletters.replay", { all: true });
    expect((res.replayed as { runId: string }[]).map((r) => r.runId)).toEqual(["l-1"]);
    expect(res.refused).toEqual([
      { runId: "q-1", sessionKey: "agent:main:quiet:one", reason: expect.stringMatching(/blocked|denied|policy/i) },
    ]);
    // The refused letter stays (discard it); the other ran in the session made for it.
    expect(await sys.svc.deadLetters.runIds()).toEqual(["q-1"]);
    expect(await sys.svc.sessions.get("agent:main:quiet:one")).toBeNull();
    expect(await sys.svc.sessions.get("agent:main:loud:one")).not.toBeNull();
    await clear();
  });

  it("a page reads only its own letters, not the whole hash", async () => {
    await clear();
    const big = "x".repeat(100_000);
    for (let i = 0; i < 100; i++) await writeIndexed(letter(`big-${i}`, 2_000 + i, `${i}:${big}`));
    const sent = async () => Number(/total_net_output_bytes:(\d+)/.exec(await sys.svc.redis.info("stats"))![1]);
    const before = await sent();
    const res = await sys.rpc("deadletters.list", { limit: 5 });
    const bytes = (await sent()) - before;
    expect((res.deadLetters as DeadLetter[]).map((l) => l.runId)).toEqual([0, 1, 2, 3, 4].map((i) => `big-${i}`));
    expect(res.deadLetters[0]).toMatchObject({ textTruncated: true, textChars: 100_002 });
    // Five letters of 100 kB and some ids; the hash holds 10 MB.
    expect(bytes).toBeLessThan(1_000_000);
    await clear();
  });

  it("refuses a cursor no listing returned, and a limit out of range", async () => {
    for (const params of [{ cursor: "not-a-cursor" }, { limit: 0 }, { limit: 1001 }, { cursor: "" }]) {
      const r = await sys.post("/v1/rpc/deadletters.list", params);
      expect(r.status, JSON.stringify(params)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
    }
  });

  it("switchboard deadletters list --limit prints one page and the cursor of the next", async () => {
    await clear();
    for (let i = 0; i < 3; i++) await writeIndexed(letter(`cli-${i}`, 3_000 + i));
    const file = writeConfigFile(sys.config);
    const env = cliEnv({ SWITCHBOARD_STATE_DIR: sys.config.storage.dir });
    const first = await runCli(["deadletters", "list", "--limit", "2", "--config", file], env);
    expect(first.code, show(first)).toBe(0);
    expect(first.stdout).toMatch(/^cli-0 /m);
    expect(first.stdout).toMatch(/^cli-1 /m);
    expect(first.stdout).not.toMatch(/^cli-2 /m);
    const cursor = /2 of 3 shown; next page: --cursor (\S+)/.exec(first.stdout)?.[1];
    expect(cursor, show(first)).toBeDefined();
    const next = await runCli(
      ["deadletters", "list", "--limit", "2", "--cursor", cursor!, "--json", "--config", file],
      env,
    );
    expect(next.code, show(next)).toBe(0);
    const page = JSON.parse(next.stdout);
    expect(page).toMatchObject({ count: 3 });
    expect(page.deadLetters.map((l: DeadLetter) => l.runId)).toEqual(["cli-2"]);
    expect(page.nextCursor).toBeUndefined();
    await clear();
  });
});
