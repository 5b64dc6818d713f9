#!/usr/bin/env node
// Fails when a source line is wider than 120 columns. The formatter (biome) wraps code at 120
// but leaves long strings and comments alone; this catches those too.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const MAX = 120;
const files = execFileSync("git", ["ls-files", "*.ts", "*.mjs", "*.cjs", "*.lua"], { encoding: "utf8" })
  .split("\n")
  .filter((f) => f && !f.startsWith("test/fixtures/openclaw-state/"));
const wide = [];
for (const file of files) {
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, i) => {
      const width = [...line].length;
      if (width > MAX) wide.push(`${file}:${i + 1}: ${width} columns`);
    });
}
if (wide.length > 0) {
  console.error(`${wide.length} line(s) wider than ${MAX} columns:\n${wide.join("\n")}`);
  process.exit(1);
}
console.log(`line width: ${files.length} files, none wider than ${MAX} columns`);
