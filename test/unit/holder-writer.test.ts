/**
 * The lease holder's transcript writer checks the file once per holding (lease token): a file
 * still as long as its handle left it is written at once; one another writer appended to, tore
 * or renamed is noticed before the write. Another writer holds the lease too, so it has a token
 * between two of this handle's: the tests leave a gap where it writes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { appendFileSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HolderWriter } from "../../src/transcript/holder-writer.js";
import type { TranscriptEntry } from "../../src/history/transcript-types.js";

const dirs: string[] = [];
const writers: HolderWriter[] = [];
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(join(tmpdir(), "sb-holder-"));
  dirs.push(dir);
  const w = new HolderWriter(dir, "everysec");
  writers.push(w);
  return { w, file: w.path("main", "s1") };
}

const line = (id: string): TranscriptEntry => ({
  type: "message",
  id,
  runId: id,
  timestamp: new Date(0).toISOString(),
  message: { role: "user", content: id, timestamp: 0 },
});
const ids = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { type: string; id: string })
    .filter((e) => e.type === "message")
    .map((e) => e.id);

describe("HolderWriter between holdings", () => {
  it("keeps writing when nobody touched the file, and after another writer appended", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")], undefined, 1);
    await w.write("main", "s1", [line("b")], undefined, 2);
    // Token 3 was another writer's.
    appendFileSync(file, `${JSON.stringify(line("other"))}\n`);
    await w.write("main", "s1", [line("c")], undefined, 4);
    expect(ids(file)).toEqual(["a", "b", "other", "c"]);
  });

  it("cuts a torn tail left by another writer before the next holding writes", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")], undefined, 1);
    appendFileSync(file, '{"type":"message","id":"torn","mess');
    await w.write("main", "s1", [line("b")], undefined, 3);
    expect(readFileSync(file, "utf8")).not.toContain("torn");
    expect(ids(file)).toEqual(["a", "b"]);
  });

  it("never writes into a file renamed away (archived) behind its handle", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")], undefined, 1);
    renameSync(file, `${file}.archived`);
    await w.write("main", "s1", [line("b")], undefined, 3);
    expect(ids(`${file}.archived`)).toEqual(["a"]);
    expect(ids(file)).toEqual(["b"]);
  });

  it("writes back-to-back holdings of one process in order, each line once", async () => {
    const { w, file } = setup();
    // Consecutive tokens: nobody held the lease in between, so the file is as the handle left it.
    for (let t = 1; t <= 5; t++) await w.write("main", "s1", [line(`t${t}`)], undefined, t);
    // A gap (token 6 was another writer's) is checked again: its append is kept, not overwritten.
    appendFileSync(file, `${JSON.stringify(line("other"))}\n`);
    await w.write("main", "s1", [line("t7")], undefined, 7);
    expect(ids(file)).toEqual(["t1", "t2", "t3", "t4", "t5", "other", "t7"]);
  });

  it("notices a writer without the lease (import, a forked spawn) even between consecutive tokens", async () => {
    const { w, file } = setup();
    await w.write("main", "s1", [line("a")], undefined, 1);
    // Whole lines appended outside the lease are kept, and the handle learns the new length.
    appendFileSync(file, `${JSON.stringify(line("imported"))}\n`);
    await w.write("main", "s1", [line("b")], undefined, 2);
    // A torn tail left outside the lease is cut before the next write, not glued to it.
    appendFileSync(file, '{"type":"message","id":"torn","mess');
    await w.write("main", "s1", [line("c")], undefined, 3);
    expect(ids(file)).toEqual(["a", "imported", "b", "c"]);
    expect(readFileSync(file, "utf8")).not.toContain("torn");
  });
});
