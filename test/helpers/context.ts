/**
 * Per-file isolation: each test file gets its own key prefix on the shared test Redis and its
 * own storage dir, so files run in parallel without seeing each other.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { inject } from "vitest";
import { parseConfig, type Config, type ConfigInput } from "../../src/config/index.js";

export function testRedisUrl(): string {
  return inject("redisUrl");
}

export function uniquePrefix(tag = "t"): string {
  return `${tag}${randomBytes(4).toString("hex")}`;
}

export function tempDir(tag = "sb"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `${tag}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A config pointing at the test Redis with a fresh prefix and storage dir, plus overrides. */
export function testConfig(overrides: ConfigInput = {}, redisUrl = testRedisUrl()): Config {
  const { dir } = tempDir("sb-store");
  const input = {
    ...overrides,
    redis: { url: redisUrl, prefix: uniquePrefix(), ...(overrides.redis ?? {}) },
    storage: { dir, ...(overrides.storage ?? {}) },
    // A test tearing down with turns still running hands them back after 5 s, not 25 s.
    workers: { shutdownGraceMs: 5000, ...(overrides.workers ?? {}) },
  };
  return parseConfig(input);
}

export function newRedis(url = testRedisUrl()): Redis {
  return new Redis(url, { maxRetriesPerRequest: null });
}
