/**
 * Bull Board's failed tab of the read-only `ready` queue shows the dead letters newest first, a
 * page at a time: it reads that page's range of the index by failure time and only those letters,
 * not every letter (Redis MONITOR counts the letters read), with the count of every letter, and
 * the index reconciled first as a listing does (docs/design/runs.md, "The ready list in Bull Board").
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReadyBoardAdapter } from "../../src/gateway/ready-board.js";
import type { DeadLetter } from "../../src/runs/dead-letters.js";
import { deadLetter, writeIndexed as writeLetter } from "../fixtures/dead-letter-support.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";

let sys: TestSystem;
let board: ReadyBoardAdapter;
/**
 * Its own Redis: MONITOR streams every client's commands, and on the shared test Redis the other
 * files' traffic could reach ioredis's monitor connection before its MONITOR was answered
 * ("Command queue state error").
 */
let redis: PrivateRedis;

beforeAll(async () => {
  redis = await startPrivateRedis();
  // No workers: nothing else reads the dead letters while their reads are counted.
  sys = await startTestSystem({ redis: { url: redis.url } }, { gateway: true, workers: false });
  board = new ReadyBoardAdapter(sys.svc);
});

afterAll(async () => {
  await sys?.close();
  await redis?.cleanup();
});

const hash = () => sys.svc.keys.deadLetters();
const index = () => sys.svc.keys.deadLetterIndex();

const letter = (runId: string, failedAt: number, text?: string) =>
  deadLetter(runId, failedAt, "agent:main:board-letters", text);

const writeIndexed = (l: DeadLetter) => writeLetter(sys.svc, l);

/**
 * The letters `fn` reads from the dead-letter hash (fields of HGET/HMGET; a whole-hash read counts
 * as Infinity), seen by MONITOR on a connection of its own.
 */
async function lettersRead<T>(fn: () => Promise<T>): Promise<{ result: T; read: number }> {
  const conn = new Redis(sys.config.redis.url);
  const mon = await conn.monitor();
  const marker = `ready-board-failed-${Date.now()}`;
  let read = 0;
  let done = false;
  mon.on("monitor", (_time: string, args: string[]) => {
    const [cmd, key] = [String(args[0]).toLowerCase(), args[1]];
    if (cmd === "echo" && key === marker) done = true;
    if (key !== hash()) return;
    if (cmd === "hget") read += 1;
    else if (cmd === "hmget") read += args.length - 2;
    else if (["hgetall", "hvals", "hscan", "hrandfield"].includes(cmd)) read = Number.POSITIVE_INFINITY;
  });
  try {
    const result = await fn();
    await sys.svc.redis.echo(marker);
    await settle(async () => done || null, { what: "MONITOR saw the marker", timeoutMs: 5_000 });
    return { result, read };
  } finally {
    mon.disconnect();
    conn.disconnect();
  }
}

describe("the ready queue's failed tab in Bull Board", () => {
  it("shows one page of dead letters newest first, reading only that page's letters", async () => {
    await sys.svc.redis.del(hash(), index());
    const all = Array.from({ length: 60 }, (_, i) =>
      // One long message on the page asked for: shown cut, as the tab showed it before.
      letter(`dl-${String(i).padStart(2, "0")}`, 1_700_000_000_000 + i * 1000, i === 45 ? "y".repeat(5000) : undefined),
    );
    for (const l of all) await writeIndexed(l);
    const newestFirst = all.map((l) => l.runId).reverse();

    const { result: jobs, read } = await lettersRead(() => board.getJobs(["failed"], 10, 19));
    expect(jobs.map((j) => j.toJSON().id)).toEqual(newestFirst.slice(10, 20));
    expect(read).toBe(10);
    const long = jobs.find((j) => j.toJSON().id === "dl-45")!.toJSON();
    expect((long.data as { text: string }).text).toBe(`${"y".repeat(4000)}…`);
    expect(long).toMatchObject({ name: "agent:main:board-letters", failedReason: "permanent: test" });
    expect(await jobs[0]!.getState()).toBe("failed");
    expect((await board.getJobCounts()).failed).toBe(60);

    // Past the end: only what is left, then nothing.
    expect((await board.getJobs(["failed"], 55, 64)).map((j) => j.toJSON().id)).toEqual(newestFirst.slice(55));
    expect(await board.getJobs(["failed"], 60, 69)).toEqual([]);
  });

  it("reconciles the index first: a stale entry and an unindexed letter of equal count", async () => {
    await sys.svc.redis.del(hash(), index());
    for (let i = 0; i < 12; i++) await writeIndexed(letter(`rc-${String(i).padStart(2, "0")}`, 5_000 + i));
    // Removed by an older process (hash only), and written by one (hash only): HLEN == ZCARD.
    await sys.svc.redis.hdel(hash(), "rc-10");
    await sys.svc.redis.hset(hash(), "rc-new", JSON.stringify(letter("rc-new", 9_000)));
    expect(await sys.svc.redis.hlen(hash())).toBe(await sys.svc.redis.zcard(index()));

    const first = await board.getJobs(["failed"], 0, 4);
    expect(first.map((j) => j.toJSON().id)).toEqual(["rc-new", "rc-11", "rc-09", "rc-08", "rc-07"]);
    expect(await sys.svc.redis.zscore(index(), "rc-10")).toBeNull();
    expect(await sys.svc.redis.zscore(index(), "rc-new")).toBe("9000");
    expect((await board.getJobCounts()).failed).toBe(12);

    // Written by an older process only (hash larger than index): indexed before the page is read.
    await sys.svc.redis.hset(hash(), "rc-newest", JSON.stringify(letter("rc-newest", 10_000)));
    const again = await board.getJobs(["failed"], 0, 1);
    expect(again.map((j) => j.toJSON().id)).toEqual(["rc-newest", "rc-new"]);
    expect((await board.getJobCounts()).failed).toBe(13);
    await sys.svc.redis.del(hash(), index());
  });
});
