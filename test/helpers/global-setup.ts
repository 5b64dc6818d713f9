import type { TestProject } from "vitest/node";
import { fileURLToPath } from "node:url";
import { acquireTestRedis } from "./redis-server.js";
import { ensureBuilt } from "./build-dist.js";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let release: (() => Promise<void>) | undefined;

export async function setup(project: TestProject): Promise<void> {
  ensureBuilt(fileURLToPath(new URL("../../", import.meta.url)));
  const r = await acquireTestRedis();
  release = r.release;
  project.provide("redisUrl", r.url);
}

export async function teardown(): Promise<void> {
  await release?.();
}
