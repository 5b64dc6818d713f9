import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { withStartLock } from "../../src/app/start-lock.js";

const dirs: string[] = [];
function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sb-start-lock-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const startTime = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
};

describe("withStartLock", () => {
  it("lets one start decide at a time: concurrent starts never overlap, and none is left holding it", async () => {
    const dir = dataDir();
    const inside = join(dir, "inside");
    let overlaps = 0;
    const start = () =>
      withStartLock(dir, "the test", 10_000, async () => {
        try {
          writeFileSync(inside, "x", { flag: "wx" });
        } catch {
          overlaps++;
          return;
        }
        await sleep(2);
        rmSync(inside);
      });
    for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 8 }, start));
    expect(overlaps).toBe(0);
    expect(existsSync(join(dir, "start.lock"))).toBe(false);
  });

  it("two processes taking it in a tight loop never hold it at once", async () => {
    // Across processes: an exclusive create and a separate write let a reader see the lock empty,
    // take it for stale and remove a live holder's lock (reviewer: hundreds of overlaps in 4 s).
    const root = fileURLToPath(new URL("../..", import.meta.url));
    const child = () =>
      promisify(execFile)(process.execPath, [
        join(root, "test/fixtures/start-lock-child.mjs"),
        join(root, "dist/src/app/start-lock.js"),
        dir,
        "1500",
      ]);
    const dir = dataDir();
    const results = (await Promise.all([child(), child()])).map((r) => JSON.parse(r.stdout));
    for (const r of results) {
      expect(r.rounds).toBeGreaterThan(10);
      expect(r.overlaps).toBe(0);
    }
  });

  it("a lock of a live start is waited for, then refused naming that start", async () => {
    const dir = dataDir();
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      await sleep(50);
      writeFileSync(join(dir, "start.lock"), `${other.pid} ${startTime(other.pid!)} token\n`);
      const t0 = Date.now();
      await expect(withStartLock(dir, "the test", 300, async () => "ran")).rejects.toThrow(
        `another switchboard start (pid ${other.pid}) is starting the test`,
      );
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
      expect(readFileSync(join(dir, "start.lock"), "utf8")).toContain("token"); // not taken from it
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("a lock whose pid now names another process, or this one in an earlier life, is stale: taken now", async () => {
    const dir = dataDir();
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      await sleep(50);
      // A pid reused after a reboot: alive, but started at another time than the lock says.
      writeFileSync(join(dir, "start.lock"), `${other.pid} 1 token\n`);
      expect(await withStartLock(dir, "the test", 5000, async () => "ran")).toBe("ran");
      // This process's own pid (pid 1 of a restarted container), left by its earlier incarnation.
      writeFileSync(join(dir, "start.lock"), `${process.pid} 1 token\n`);
      expect(await withStartLock(dir, "the test", 5000, async () => "ran")).toBe("ran");
      // A dead pid, and an unreadable one.
      writeFileSync(join(dir, "start.lock"), "999999999 1 token\n");
      expect(await withStartLock(dir, "the test", 5000, async () => "ran")).toBe("ran");
      writeFileSync(join(dir, "start.lock"), "");
      expect(await withStartLock(dir, "the test", 5000, async () => "ran")).toBe("ran");
      expect(existsSync(join(dir, "start.lock"))).toBe(false);
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("the holder removes the lock only while it is its own", async () => {
    const dir = dataDir();
    const lock = join(dir, "start.lock");
    await withStartLock(dir, "the test", 5000, async () => {
      writeFileSync(lock, "someone else's\n"); // replaced under it (by hand, say)
    });
    expect(readFileSync(lock, "utf8")).toBe("someone else's\n");
  });
});
