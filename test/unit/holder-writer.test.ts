/**
 * The lease holder's transcript writer checks the file once per holding (lease token): a file
 * still as long as its handle left it is written at once; one another writer appended to, tore
 * or renamed is noticed before the write. Another writer holds the lease too, so it has a token
 * between two of this handle's: the tests leave a gap where it writes.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  appendFileSync,
  closeSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { open } from "node:fs/promises";
import { HolderWriter, type FsyncMode, type WriterEvents } from "../../src/transcript/holder-writer.js";
import { maxOpenFilesFor, openFileLimit } from "../../src/transcript/handle-cap.js";
import type { TranscriptEntry } from "../../src/history/transcript-types.js";
import { settle } from "../helpers/settle.js";

const dirs: string[] = [];
const writers: HolderWriter[] = [];
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(fsync: FsyncMode = "everysec") {
  const dir = mkdtempSync(join(tmpdir(), "sb-holder-"));
  dirs.push(dir);
  const synced: string[] = [];
  const failed: string[] = [];
  const events: WriterEvents = { synced: (t) => synced.push(t), syncFailed: (f) => failed.push(f) };
  const w = new HolderWriter(dir, fsync, undefined, events);
  writers.push(w);
  return { w, dir, file: w.path("main", "s1"), synced, failed };
}

const line = (id: string): TranscriptEntry => ({
  type: "message",
  id,
  runId: id,
  timestamp: new Date(0).toISOString(),
  message: { role: "user", content: id, timestamp: 0 },
});
/** The message ids in the file, as readers see them (a line that does not parse is skipped). */
const ids = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as { type: string; id: string }];
      } catch {
        return [];
      }
    })
    .filter((e) => e.type === "message")
    .map((e) => e.id);

describe("HolderWriter between writes", () => {
  it("keeps writing when nobody touched the file, and after another writer appended", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    await w.write("main", "s1", [line("b")]);
    // Token 3 was another writer's.
    appendFileSync(file, `${JSON.stringify(line("other"))}\n`);
    await w.write("main", "s1", [line("c")]);
    expect(ids(file)).toEqual(["a", "b", "other", "c"]);
  });

  it("closes off a torn tail left by another writer before the next holding writes (never cuts it)", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    appendFileSync(file, '{"type":"message","id":"torn","mess');
    await w.write("main", "s1", [line("b")]);
    // The fragment is a line of its own, skipped by readers; b is not glued to it.
    expect(readFileSync(file, "utf8").split("\n")).toContain('{"type":"message","id":"torn","mess');
    expect(ids(file)).toEqual(["a", "b"]);
  });

  it("keeps a complete last line another tool wrote without its newline", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    appendFileSync(file, JSON.stringify(line("no-newline")));
    await w.write("main", "s1", [line("b")]);
    expect(ids(file)).toEqual(["a", "no-newline", "b"]);
  });

  it("never writes into a file renamed away (archived) behind its handle", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    renameSync(file, `${file}.archived`);
    await w.write("main", "s1", [line("b")]);
    expect(ids(`${file}.archived`)).toEqual(["a"]);
    expect(ids(file)).toEqual(["b"]);
  });

  it("never writes into a file deleted or moved aside between two back-to-back writes", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    await w.write("main", "s1", [line("b")]);
    // Deleted behind the open handle (an operator, `rm -rf` of the storage): a new file, with
    // its header, takes the next lines; they are not appended to the unlinked inode.
    rmSync(file);
    await w.write("main", "s1", [line("c")]);
    expect(ids(file)).toEqual(["c"]);
    expect(readFileSync(file, "utf8").split("\n")[0]).toMatch(/"type":"session"/);
    // Moved aside (a backup tool): the moved file keeps what it had, the path gets what follows.
    renameSync(file, `${file}.moved`);
    await w.write("main", "s1", [line("d")]);
    expect(ids(`${file}.moved`)).toEqual(["c"]);
    expect(ids(file)).toEqual(["d"]);
  });

  it("notices a writer without the lease (import, a forked spawn) between two writes", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")]);
    // Whole lines appended outside the lease are kept, and the handle learns the new length.
    appendFileSync(file, `${JSON.stringify(line("imported"))}\n`);
    await w.write("main", "s1", [line("b")]);
    // A torn tail left outside the lease is closed off before the next write, not glued to it.
    appendFileSync(file, '{"type":"message","id":"torn","mess');
    await w.write("main", "s1", [line("c")]);
    expect(ids(file)).toEqual(["a", "imported", "b", "c"]);
  });
});

describe("HolderWriter durability", () => {
  it("always: every write is fsynced, and a new file's name with its first write", async () => {
    const { w, file, synced } = setup("always");
    // The agent's directories do not exist yet: each one made is a new name in its parent.
    await w.write("main", "s1", [line("a")]);
    expect(synced.filter((t) => t === "file")).toHaveLength(1);
    const dirsFirst = synced.filter((t) => t === "dir").length;
    expect(dirsFirst).toBeGreaterThanOrEqual(2);
    await w.write("main", "s1", [line("b")]);
    expect(synced.filter((t) => t === "file")).toHaveLength(2);
    expect(synced.filter((t) => t === "dir")).toHaveLength(dirsFirst);
    // A second session of the agent: its directory exists, the new file's name is synced once.
    await w.write("main", "s2", [line("c")]);
    expect(synced.filter((t) => t === "dir")).toHaveLength(dirsFirst + 1);
    expect(ids(file)).toEqual(["a", "b"]);
  });

  it("everysec: a new file's name is synced with its first group commit", async () => {
    const { w, synced } = setup("everysec");
    mkdirSync(join(w.path("main", "s1"), ".."), { recursive: true });
    await w.write("main", "s1", [line("a")]);
    expect(synced).toEqual([]);
    await w.release("main", "s1");
    expect(synced).toEqual(["file", "dir"]);
  });

  it("always: a re-run's lines written by another process are fsynced before they count", async () => {
    const { w, dir, synced } = setup("always");
    // The earlier attempt: another process (another writer) that may have died before its fsync.
    const earlier = new HolderWriter(dir, "everysec");
    writers.push(earlier);
    await earlier.write("main", "s1", [line("r1")]);
    expect(await w.linesOfRun("main", "s1", "r1")).toHaveLength(1);
    expect(synced).toContain("file");
    // Nothing found, nothing to make durable.
    const before = synced.length;
    expect(await w.linesOfRun("main", "s1", "r2")).toEqual([]);
    expect(synced).toHaveLength(before);
  });

  it("writes nothing when the lease is not surely held any more right before the bytes go out", async () => {
    const { w, file } = setup("always");
    await w.write("main", "s1", [line("a")]);
    const lapsed = () => {
      throw new Error("lease lapsed");
    };
    await expect(w.write("main", "s1", [line("b")], { assertHeld: lapsed })).rejects.toThrow("lease lapsed");
    expect(ids(file)).toEqual(["a"]);
  });

  it("a group commit that fails is reported, and the next write goes on with a new handle", async () => {
    const { w, file, failed } = setup("everysec");
    await w.write("main", "s1", [line("a")]);
    await w.write("main", "s1", [line("b")]);
    // The writer's descriptor now names /dev/null, which refuses fsync (EINVAL): a real failure.
    swapForDevNull(file);
    await settle(() => failed.length > 0, { what: "the failed group commit reported", timeoutMs: 3000 });
    expect(failed).toEqual([file]);
    await w.write("main", "s1", [line("c")]);
    expect(ids(file)).toEqual(["a", "b", "c"]);
  });

  it("everysec: a new file whose first fsync fails still gets its name fsynced by a later group commit", async () => {
    const { w, file, synced, failed } = setup("everysec");
    const tick = () => (w as unknown as { tick: () => Promise<void> }).tick();
    clearInterval((w as unknown as { timer: NodeJS.Timeout }).timer); // passes run when told
    // The directory exists: the only name owed is the new file's own.
    mkdirSync(join(file, ".."), { recursive: true });
    await w.write("main", "s1", [line("a")]);
    // Its descriptor now names /dev/null, which refuses fsync (EINVAL): a real failure.
    swapForDevNull(file);
    await tick();
    expect(failed).toEqual([file]);
    expect(synced).toEqual([]);
    // The name's fsync went with the file's, never tried; the next handle finds the file not new.
    await w.write("main", "s1", [line("b")]);
    await tick();
    expect(synced.filter((t) => t === "file")).toHaveLength(1);
    // It used to be never done: a power loss could take the file while its later lines were fsynced.
    expect(synced).toContain("dir");
    expect(failed).toEqual([file]);
    // Done once: the pass after it owes nothing.
    const dirs = synced.filter((t) => t === "dir").length;
    await tick();
    expect(synced.filter((t) => t === "dir")).toHaveLength(dirs);
    expect(ids(file)).toEqual(["a", "b"]);
  });
});

describe("HolderWriter: one agent's failing directory", () => {
  it("always: a directory that cannot be fsynced fails only its own files, not another agent's", async () => {
    const { w, synced } = setup("always");
    const aDir = join(w.path("a", "sa1"), "..");
    mkdirSync(aDir, { recursive: true });
    const bad = statSync(aDir).ino;
    // Agent a's sessions directory refuses fsync (EIO: a bad disk under agents/a), every time.
    const probe = await open(join(aDir, "..", "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const realSync = proto.sync;
    proto.sync = async function (this: { fd: number }) {
      const st = fstatSync(this.fd);
      if (st.isDirectory() && st.ino === bad)
        throw Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO", errno: -5, syscall: "fsync" });
      return await realSync.call(this);
    };
    try {
      // Its own new session is not durable: that turn fails (a storage fault, retried).
      await expect(w.write("a", "sa1", [line("a1")])).rejects.toMatchObject({ code: "EIO" });
      // Another agent's new sessions and re-runs go on: they used to fsync a's directory first
      // and fail with it, parked until their deadline.
      await w.write("b", "sb1", [line("b1")]);
      const dirsBefore = synced.filter((t) => t === "dir").length;
      expect(await w.linesOfRun("b", "sb1", "b1")).toHaveLength(1);
      await w.write("b", "sb2", [line("b2")]);
      expect(synced.filter((t) => t === "dir").length).toBeGreaterThan(dirsBefore);
      // a's re-run still finds its directory failing: its lines do not count yet.
      await expect(w.linesOfRun("a", "sa1", "a1")).rejects.toMatchObject({ code: "EIO" });
    } finally {
      proto.sync = realSync;
    }
    // Healed: a's re-run fsyncs its directory and its lines count.
    const dirs = synced.filter((t) => t === "dir").length;
    expect(await w.linesOfRun("a", "sa1", "a1")).toHaveLength(1);
    expect(synced.filter((t) => t === "dir").length).toBeGreaterThan(dirs);
  });
});

describe("HolderWriter handles closed in use", () => {
  /** The writer's private parts these tests drive (the timer is stopped: passes run when told). */
  type Inside = {
    cap: {
      files: Map<string, { fh: { sync: () => Promise<void>; close: () => Promise<void> }; users: number }>;
      opened: number;
      closeIdle: () => Promise<number>;
    };
    timer: NodeJS.Timeout;
    tick: () => Promise<void>;
  };
  const inside = (w: HolderWriter) => {
    const i = w as unknown as Inside;
    clearInterval(i.timer);
    return i;
  };
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    return { opened, open };
  };

  // A turn's write landing at any point around a group commit's failing fsync: the handle it
  // took was closed under it (fd -1, a RangeError), a permanent failure instead of a storage fault.
  for (const delay of [0, 1, 2, 3, 4, 6, 10]) {
    it(`a write while the group commit's fsync fails still lands (${delay} microtasks later)`, async () => {
      const { w, file, failed } = setup("everysec");
      const i = inside(w);
      await w.write("main", "s1", [line("a")]);
      const f = i.cap.files.get(file)!;
      const realSync = f.fh.sync.bind(f.fh);
      const eio = gate();
      let calls = 0;
      f.fh.sync = async () => {
        if (calls++ > 0) return await realSync();
        await eio.opened;
        throw Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" });
      };
      const pass = i.tick();
      await settle(() => calls > 0, { what: "the group commit's fsync begun" });
      eio.open();
      for (let n = 0; n < delay; n++) await Promise.resolve();
      await w.write("main", "s1", [line("b")]);
      await pass;
      expect(failed).toEqual([file]);
      expect(ids(file)).toEqual(["a", "b"]);
      // The failed handle was closed once its last user was done: only the new one (if any) is left.
      await settle(() => i.cap.opened === i.cap.files.size, { what: "the failed handle closed" });
      expect(i.cap.opened).toBeLessThanOrEqual(1);
    });
  }

  it("closing the idle handles skips one a caller took after the list was made", async () => {
    const { w } = setup("everysec");
    const i = inside(w);
    const n = 33; // one past the 32 handles closed at once: the last waits for a lane
    for (let s = 0; s < n; s++) await w.write("main", `s${s}`, [line(`a${s}`)]);
    await i.tick(); // all fsynced: closing them needs no fsync
    const target = w.path("main", `s${n - 1}`);
    await w.write("main", `s${n - 1}`, [line("b")]); // dirty again: the caller below fsyncs it
    const closes = gate();
    for (const [file, f] of i.cap.files) {
      if (file === target) continue;
      const realClose = f.fh.close.bind(f.fh);
      f.fh.close = async () => {
        await closes.opened;
        return await realClose();
      };
    }
    const t = i.cap.files.get(target)!;
    const realSync = t.fh.sync.bind(t.fh);
    const fsync = gate();
    t.fh.sync = async () => {
      await fsync.opened;
      return await realSync();
    };
    const closing = i.cap.closeIdle(); // the list: all 33 idle
    // A re-run's check for its lines takes the handle (and fsyncs it) while the lanes are busy.
    const check = w.linesOfRun("main", `s${n - 1}`, "x");
    expect(t.users).toBe(1);
    closes.open();
    expect(await closing).toBe(n - 1);
    fsync.open();
    // It used to be closed under the caller: its fsync failed ("file closed"), and so the turn.
    await expect(check).resolves.toEqual([]);
    expect(i.cap.files.get(target)).toBe(t);
    await w.write("main", `s${n - 1}`, [line("c")]);
    expect(ids(target)).toEqual([`a${n - 1}`, "b", "c"]);
  });
});

describe("HolderWriter open handles", () => {
  it("keeps at most maxOpenFiles handles open in a burst of new sessions, and loses nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-holder-"));
    dirs.push(dir);
    const synced: string[] = [];
    const w = new HolderWriter(dir, "everysec", undefined, { synced: (t) => synced.push(t) }, { maxOpenFiles: 32 });
    writers.push(w);
    const fdsOpen = () => readdirSync("/proc/self/fd").length;
    const before = fdsOpen();
    let peakHandles = 0;
    let peakFds = 0;
    const measure = () => {
      peakHandles = Math.max(peakHandles, (w as unknown as { cap: { opened: number } }).cap.opened);
      peakFds = Math.max(peakFds, fdsOpen() - before);
    };
    const sessions = 600;
    for (const round of ["a", "b"]) {
      // All at once: most of them wait for a handle to be released, none is closed in use.
      await Promise.all(
        Array.from({ length: sessions }, (_, i) => w.write("main", `s${i}`, [line(`${round}${i}`)]).then(measure)),
      );
      if (round === "a") {
        // A handle closed to make room was fsynced first (everysec: nothing else would).
        expect(synced.filter((t) => t === "file").length).toBeGreaterThanOrEqual(sessions - 32);
      }
    }
    // It used to keep one handle per session written in the last 5 s (1,200 descriptors here).
    expect(peakHandles).toBeLessThanOrEqual(32);
    expect(peakFds).toBeLessThanOrEqual(32 + 8); // plus a directory being fsynced now and then
    for (let i = 0; i < sessions; i++) expect(ids(w.path("main", `s${i}`))).toEqual([`a${i}`, `b${i}`]);
  });

  it("sizes the cap from the process's open-file limit", () => {
    const limit = Number(/^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1]);
    expect(openFileLimit()).toBe(limit);
    expect(maxOpenFilesFor(1024)).toBe(256);
    expect(maxOpenFilesFor(1_048_576)).toBe(4096);
    expect(maxOpenFilesFor(40)).toBe(16);
    expect(maxOpenFilesFor(Number.POSITIVE_INFINITY)).toBe(4096);
    expect(maxOpenFilesFor(undefined)).toBe(256);
  });
});

describe("HolderWriter group commit", () => {
  it("fsyncs every dirty file once per pass, many at once, and never runs two passes at once", async () => {
    const { w, dir } = setup("everysec");
    // Every fsync takes 20 ms (a slow disk); count them and how many run at once.
    const probe = await open(join(dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const realSync = proto.sync;
    const syncedHandles: unknown[] = [];
    let running = 0;
    let peak = 0;
    proto.sync = async function (this: { fd: number }) {
      if (fstatSync(this.fd).isDirectory()) return await realSync.call(this); // a new file's name
      running++;
      peak = Math.max(peak, running);
      syncedHandles.push(this);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      return await realSync.call(this);
    };
    try {
      await Promise.all(Array.from({ length: 100 }, (_, i) => w.write("main", `g${i}`, [line(`x${i}`)])));
      const tick = () => (w as unknown as { tick: () => Promise<void> }).tick();
      const started = Date.now();
      const first = tick();
      // Written while the pass runs, and a tick meanwhile (as the timer's, when fsyncs are
      // slower than the interval): not a second pass alongside, one more right after.
      await Promise.all(Array.from({ length: 20 }, (_, i) => w.write("main", `h${i}`, [line(`y${i}`)])));
      const second = tick();
      await Promise.all([first, second]);
      const took = Date.now() - started;
      // One fsync per written file, none twice.
      expect(syncedHandles).toHaveLength(120);
      expect(new Set(syncedHandles).size).toBe(120);
      // One after another, 120 fsyncs of 20 ms took 2.4 s (a few at once only where the timer's
      // ticks overlapped a pass still running); 32 at once, about 0.1 s.
      expect(peak).toBeGreaterThanOrEqual(16);
      expect(took).toBeLessThan(1500);
      // At most one pass's worth: two passes at once would reach 64.
      expect(peak).toBeLessThanOrEqual(32);
    } finally {
      proto.sync = realSync;
    }
  });
});

/** Close this process's descriptor on `file` and open /dev/null until it gets that number. */
function swapForDevNull(file: string): void {
  const fd = Number(readdirSync("/proc/self/fd").find((n) => readlinkSync(`/proc/self/fd/${n}`) === file));
  if (!Number.isInteger(fd)) throw new Error(`no descriptor on ${file}`);
  closeSync(fd);
  const others: number[] = [];
  for (let got = openSync("/dev/null", "r"); got !== fd; got = openSync("/dev/null", "r")) {
    others.push(got);
    if (others.length > 64) throw new Error("could not take the descriptor back");
  }
  for (const o of others) closeSync(o);
}
