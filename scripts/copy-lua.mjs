// tsc does not copy non-TS assets: the Lua scripts ship next to the compiled store modules.
import { cpSync, existsSync } from "node:fs";
const from = "src/storage/lua";
if (existsSync(from)) cpSync(from, "dist/src/storage/lua", { recursive: true });
const runs = "src/runs/lua";
if (existsSync(runs)) cpSync(runs, "dist/src/runs/lua", { recursive: true });
