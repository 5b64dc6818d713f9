/**
 * A long-running process joining its deployment: register its config fingerprint (refusing a
 * mismatch unless forced) and describe, for its start-up banner, who else shares its Redis.
 */
import type { Config } from "../config/schema.js";
import { createRedis } from "../queues/redis-connections.js";
import { packageVersion } from "./package-version.js";
import { configFingerprint } from "./fingerprint.js";
import {
  joinRegistry,
  type LiveProcess,
  type ProcessRecord,
  type ProcessRole,
  type Registration,
} from "./process-registry.js";

export * from "./fingerprint.js";
export * from "./process-registry.js";

export async function joinDeployment(
  config: Config,
  opts: { role: ProcessRole; force?: boolean; queues?: string[] },
): Promise<Registration> {
  const redis = createRedis(config.redis.url, "producer");
  try {
    return await joinRegistry(redis, {
      role: opts.role,
      version: packageVersion(),
      prefix: config.redis.prefix,
      fingerprint: configFingerprint(config),
      ttlMs: config.deployment.registryTtlMs,
      ...(opts.force ? { force: true } : {}),
      ...(opts.queues ? { queues: opts.queues } : {}),
    });
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function countRoles(ps: LiveProcess[]): string {
  const by = new Map<string, number>();
  for (const p of ps) by.set(p.role, (by.get(p.role) ?? 0) + 1);
  return [...by].map(([role, n]) => plural(n, role)).join(", ");
}

/** "no other Switchboard process uses it" / "shared with 3 other Switchboard processes: …". */
export function sharingSummary(self: Pick<ProcessRecord, "prefix">, others: LiveProcess[]): string {
  if (others.length === 0) return "no other Switchboard process uses it";
  const groups = new Map<string, LiveProcess[]>();
  for (const p of others) groups.set(p.prefix, [...(groups.get(p.prefix) ?? []), p]);
  const parts = [...groups]
    .sort(([a], [b]) => (a === self.prefix ? -1 : b === self.prefix ? 1 : a.localeCompare(b)))
    .map(
      ([prefix, ps]) =>
        `${countRoles(ps)} on prefix ` +
        `"${prefix}"${prefix === self.prefix ? " (this deployment)" : " (another deployment)"}`,
    );
  const who = others.length === 1 ? "1 other Switchboard process" : `${others.length} other Switchboard processes`;
  return `SHARED with ${who}: ${parts.join("; ")}`;
}
