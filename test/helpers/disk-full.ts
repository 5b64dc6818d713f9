/** A full file system, for storage-fault tests (on a small tmpfs of their own). */
import { readdirSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Fill the file system holding `dir` until it refuses writes; returns a function that frees it.
 * A file can still grow inside its last, partly used page: texts written afterwards must be
 * longer than a page so each write needs a new one.
 */
export function fillDisk(dir: string): () => void {
  const st = statfsSync(dir);
  try {
    writeFileSync(join(dir, "filler.bin"), Buffer.alloc(Number(st.bavail) * Number(st.bsize)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  }
  for (let i = 0; ; i++) {
    try {
      writeFileSync(join(dir, `fill-${i}`), Buffer.alloc(512));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
      throw err;
    }
  }
  return () => {
    for (const f of readdirSync(dir)) if (f.startsWith("fill")) rmSync(join(dir, f), { force: true });
  };
}
