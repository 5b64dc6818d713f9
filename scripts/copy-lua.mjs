// tsc does not copy non-TS assets: every `lua/` folder under src/ ships next to its compiled
// module (dist/src/<same path>/lua), where the code loads it relative to import.meta.url.
import { cpSync, readdirSync } from "node:fs";
import { join } from "node:path";

function walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const p = join(dir, e.name);
    if (e.name === "lua") cpSync(p, join("dist", p), { recursive: true });
    else walk(p);
  }
}
walk("src");
