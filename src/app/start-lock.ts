/**
 * One `switchboard start` at a time decides who serves a data dir's embedded Redis (adopt,
 * secure, replace or start anew, src/app/embedded-redis.ts): two at once both read the record
 * before either wrote it, and then both started a server on one AOF, or each gave an old
 * passwordless server its own password and took the other's for a dead server.
 *
 * The lock is the file `start.lock`, holding `<pid> <start time> <token>`:
 * - taken by hard-linking a file already written in full to that name, which fails when it
 *   exists: the lock is never seen half-written (an exclusive create and a separate write were);
 * - held while its pid lives with the same start time (`/proc/<pid>/stat`, where there is one):
 *   a pid reused by another process (a reboot, or pid 1 of a restarted container) does not hold
 *   it, nor does a lock left by this very process's earlier incarnation;
 * - a stale one is moved aside under a unique name and removed only if it is still the stale
 *   one read (else it is put back), and the holder removes it only while it is its own, so no
 *   start removes a live start's lock.
 */
import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { processAlive } from "./process-alive.js";

const LOCK_FILE = "start.lock";

/** The start time of process `pid` (clock ticks since boot), or "" where /proc cannot say. */
function startTimeOf(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces, in parentheses): state is field 3.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
  } catch {
    return "";
  }
}

function readLock(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** The pid of the start holding a lock with this content, or undefined when it is stale. */
function holderOf(content: string): number | undefined {
  const [pidText, started] = content.trim().split(" ");
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return undefined;
  const now = startTimeOf(pid);
  return started && now && started !== now ? undefined : pid;
}

/** Remove the lock if it still holds `stale`; put back what another start took meanwhile. */
function removeStale(file: string, stale: string): void {
  const aside = `${file}.${randomBytes(6).toString("hex")}`;
  try {
    renameSync(file, aside);
  } catch {
    return; // gone already
  }
  if (readLock(aside) !== stale) {
    try {
      linkSync(aside, file); // a live start's lock, taken meanwhile: back where it was
    } catch {
      // Yet another start took the lock in between: that one holds it now.
    }
  }
  rmSync(aside, { force: true });
}

export async function withStartLock<T>(
  dataDir: string,
  what: string,
  waitMs: number,
  decide: () => Promise<T>,
): Promise<T> {
  const file = join(dataDir, LOCK_FILE);
  const mine = `${process.pid} ${startTimeOf(process.pid)} ${randomBytes(8).toString("hex")}\n`;
  const draft = `${file}.${randomBytes(6).toString("hex")}`;
  writeFileSync(draft, mine, { mode: 0o600 });
  const deadline = Date.now() + waitMs;
  try {
    for (;;) {
      try {
        linkSync(draft, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const content = readLock(file);
      if (content === undefined) continue; // removed meanwhile: try again
      const holder = holderOf(content);
      if (holder === undefined) {
        removeStale(file, content);
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`another switchboard start (pid ${holder}) is starting ${what}; if none is, remove ${file}`);
      }
      await sleep(100);
    }
  } finally {
    rmSync(draft, { force: true });
  }
  try {
    return await decide();
  } finally {
    if (readLock(file) === mine) rmSync(file, { force: true });
  }
}
