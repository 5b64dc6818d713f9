import type { TestProject } from "vitest/node";
import { acquireTestRedis } from "./redis-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let release: (() => Promise<void>) | undefined;

export async function setup(project: TestProject): Promise<void> {
  const r = await acquireTestRedis();
  release = r.release;
  project.provide("redisUrl", r.url);
}

export async function teardown(): Promise<void> {
  await release?.();
}
