// `npm run build`, skipped when dist/ is newer than every source (src, workers, bench): a
// repeated `npm run bench` then starts measuring at once. Same rule as the test suite's
// global setup (test/helpers/build-dist.ts).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

const sources = ["src", "bin", "bench"].filter((d) => existsSync(d));
const srcNewest = Math.max(...sources.map(newestMtime), statSync("package-lock.json").mtimeMs);
const fresh =
  existsSync("dist/src/index.js") &&
  newestMtime("dist") >= srcNewest &&
  statSync("dist/src/index.js").mtimeMs >= srcNewest;
if (!fresh) execFileSync("npm", ["run", "build", "--silent"], { stdio: "inherit" });
