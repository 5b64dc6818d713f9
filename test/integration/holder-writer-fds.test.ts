/**
 * The lease holder's transcript writer in a process with a small open-file limit, as a worker
 * on a host with `ulimit -Hn 1024`: a burst of new sessions kept one handle per session open
 * (4,241 descriptors for 5,000 sessions in 6 s), until every open failed with EMFILE and turns
 * were parked as storage faults. And a directory fsync that found no descriptor was skipped in
 * silence, the turn acknowledged under `fsync: "always"` with its file's name not durable.
 * Real child processes (test/fixtures/holder-writer-fds-child.mjs) started under `ulimit -n`.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { tempDir } from "../helpers/context.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

const CHILD = join(ROOT, "test/fixtures/holder-writer-fds-child.mjs");
const WRITER = join(ROOT, "dist/src/transcript/holder-writer.js");
const run = promisify(execFile);

let cleanup: (() => void) | undefined;
afterEach(() => cleanup?.());

/** The child under an open-file limit of `limit` (soft and hard: Node raises the soft one). */
async function child(limit: number, args: Record<string, unknown>): Promise<any> {
  const { dir, cleanup: done } = tempDir("sb-fds");
  cleanup = done;
  const json = JSON.stringify({ modulePath: WRITER, dir, ...args });
  const { stdout } = await run(
    "sh",
    ["-c", `ulimit -n ${limit} && exec "$0" "$1" "$2"`, process.execPath, CHILD, json],
    {
      timeout: 60_000,
    },
  );
  return { dir, ...JSON.parse(stdout.trim().split("\n").at(-1)!) };
}

/** The message ids of one transcript, in file order. */
function ids(dir: string, sessionId: string): string[] {
  return readFileSync(join(dir, "agents/main/sessions", `${sessionId}.jsonl`), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { type: string; id: string })
    .filter((e) => e.type === "message")
    .map((e) => e.id);
}

describe("HolderWriter under a small open-file limit", () => {
  it("writes 1,000 new sessions at once, twice, within a quarter of the limit: no EMFILE, nothing lost", async () => {
    const r = await child(256, { mode: "burst", sessions: 1000 });
    expect(r.limit).toBe(256);
    expect(r.errors).toEqual([]);
    // The cap (a quarter of 256): the rest of the descriptors stay the process's.
    expect(r.peakHandles).toBeLessThanOrEqual(64);
    expect(r.peakOpen).toBeLessThan(256);
    for (let i = 0; i < 1000; i++) expect(ids(r.dir, `s${i}`)).toEqual([`a${i}`, `b${i}`]);
  });

  it('"always": a new file\'s directory fsync out of descriptors closes an idle handle and is done', async () => {
    const r = await child(256, { mode: "dirsync-idle" });
    expect(r.write).toBe("ok");
    expect(r.afterWrite).toEqual({ file: 1, dir: 1 });
    expect(ids(r.dir, "fresh")).toEqual(["f1"]);
  });

  it('"always": with no handle to close, the turn is not finished; its re-run makes the name durable', async () => {
    const r = await child(256, { mode: "dirsync-none" });
    // It used to answer ok with the directory never fsynced.
    expect(r.write).toBe("EMFILE");
    expect(r.afterWrite).toEqual({ file: 1, dir: 0 });
    // The re-run (the turn parked as a storage fault, then tried again) finds its line and
    // fsyncs the file and its directory before counting it.
    expect(r.rerun).toEqual(["f1"]);
    expect(r.afterRerun).toEqual({ file: 2, dir: 1 });
    expect(ids(r.dir, "fresh")).toEqual(["f1"]);
  });

  it('"everysec": a directory fsync that finds no descriptor is reported, and retried by the next passes', async () => {
    const r = await child(256, { mode: "dirsync-everysec" });
    expect(r.write).toBe("ok");
    // The file's fsync was done, its name's was not, and the owner heard (storage health, metric).
    expect(r.afterWrite).toEqual({ file: 1, dir: 0 });
    // The next group commit tries the directory again; still no descriptor: reported again.
    expect(r.afterRetryShort).toEqual({ file: 1, dir: 0 });
    expect(r.failedShort).toEqual(["EMFILE", "EMFILE"]);
    // It used to be tried never again (the name not durable while later group commits succeeded);
    // with descriptors back, the next group commit does it, and nothing more is reported.
    expect(r.afterRetry).toEqual({ file: 1, dir: 1 });
    expect(r.failed).toEqual(["EMFILE", "EMFILE"]);
    expect(ids(r.dir, "fresh")).toEqual(["f1"]);
  });
});
