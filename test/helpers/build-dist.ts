/**
 * Child-process tests (concurrent writers, worker processes killed with -9) run the compiled
 * code in dist/. Build it once per test run, and only when a source is newer than the output.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, name.name);
    if (name.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

export function ensureBuilt(root: string): void {
  const marker = join(root, "dist/src/index.js");
  const srcNewest = Math.max(
    ...["src", "bin", "bench"].filter((d) => existsSync(join(root, d))).map((d) => newestMtime(join(root, d))),
  );
  if (existsSync(marker) && statSync(marker).mtimeMs >= srcNewest && newestMtime(join(root, "dist")) >= srcNewest)
    return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
  execFileSync("node", ["scripts/copy-lua.mjs"], { cwd: root, stdio: "inherit" });
}
