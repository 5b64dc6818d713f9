import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Two cores here and in CI: files with real processes and timing want room to breathe.
    maxWorkers: 2,
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "error" },
  },
});
