#!/usr/bin/env node
/** Gateway process entry point (what `switchboard gateway` runs). Stateless: run any number. */
import { serveCommand } from "../src/cli/commands/serve.js";

serveCommand("gateway", {}).catch((err: unknown) => {
  process.stderr.write(`error: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
