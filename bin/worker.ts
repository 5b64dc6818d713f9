#!/usr/bin/env node
/**
 * Worker process entry point (what `switchboard worker` runs), for process managers and
 * containers that start a file rather than the CLI:
 *
 *   node dist/bin/worker.js                          # every queue
 *   SWITCHBOARD_QUEUES=runs,announce node dist/bin/worker.js
 *   SWITCHBOARD_CONCURRENCY=32 node dist/bin/worker.js
 *
 * Config as everywhere: $SWITCHBOARD_CONFIG, REDIS_URL, SWITCHBOARD_STATE_DIR.
 */
import { serveCommand } from "../src/cli/commands/serve.js";

serveCommand("worker", {
  ...(process.env.SWITCHBOARD_QUEUES ? { queues: process.env.SWITCHBOARD_QUEUES } : {}),
  ...(process.env.SWITCHBOARD_CONCURRENCY ? { concurrency: process.env.SWITCHBOARD_CONCURRENCY } : {}),
}).catch((err: unknown) => {
  process.stderr.write(`error: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
