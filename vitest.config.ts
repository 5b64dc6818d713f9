import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Three forks on the two cores here and in CI: most of a test file's time is spent waiting
    // (on Redis, on child processes, on timers), so a third file fits in the gaps. Tests that
    // depend on timing are written for a loaded machine (docs/development.md, "The test suite").
    maxWorkers: 3,
    // A fork runs file after file: the modules are loaded once per fork, not once per file (a
    // third of the suite's CPU). Test files therefore share process-wide state; each cleans up
    // what it started, and counts this process's metrics from a snapshot of its own.
    isolate: false,
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "error" },
  },
});
