/**
 * The running sub-agents below a session, and silencing them when their requester is stopped.
 *
 * `/stop`, `sessions.reset` and `sessions.delete` stop a session's descendants with it. Their
 * announces are suppressed first (as `subagents kill` does, and as OpenClaw's stop of a
 * requester's sub-agents does): a "was killed" report would otherwise start a new turn in the
 * session right after its user said stop, and post it to the channel (or, after a reset, open
 * the new session with a leftover of the old one).
 */
import type { RunDeps } from "../runs/run-deps.js";
import { stopSession } from "../runs/stop.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { SubagentRegistry, type SubagentRun } from "./registry.js";
import { reportWaits, withOutcome } from "./run-state.js";

type DescendantDeps = Pick<RunDeps, "runs" | "sessions">;

/** Running sub-agent runs below `rootKey`, found through the children index (breadth first). */
export async function runningDescendants(
  svc: DescendantDeps,
  registry: SubagentRegistry,
  rootKey: string,
): Promise<SubagentRun[]> {
  const out: SubagentRun[] = [];
  const queue = [rootKey];
  const seen = new Set<string>(queue);
  while (queue.length) {
    const key = queue.shift()!;
    for (const childKey of await svc.sessions.childKeys(key)) {
      if (seen.has(childKey)) continue;
      seen.add(childKey);
      queue.push(childKey);
      const id = await registry.currentRunOf(childKey);
      const r = id ? await registry.get(id) : null;
      // Running, or ended with its report waiting for sub-agents of its own (still active).
      if (r && ((await withOutcome(svc, r)).status === "running" || reportWaits(r))) out.push(r);
    }
  }
  return out;
}

/** Suppress the announces of every running sub-agent below `rootKey` (see the module comment). */
async function silenceDescendants(
  svc: DescendantDeps & { redis: RedisClient; keys: RedisKeys },
  rootKey: string,
): Promise<number> {
  const registry = new SubagentRegistry(svc.redis, svc.keys);
  let silenced = 0;
  for (const r of await runningDescendants(svc, registry, rootKey))
    if ((await registry.suppressKilled(r.runId)) === "suppressed") silenced++;
  return silenced;
}

/**
 * `/stop`, `sessions.reset` and `sessions.delete`: the sub-agents below `sessionKey` are silenced,
 * then the session and they are stopped (src/runs/stop.ts). Returns how many runs were stopped.
 */
export async function stopSessionAndSilence(
  svc: Parameters<typeof stopSession>[0] & DescendantDeps & { redis: RedisClient; keys: RedisKeys },
  sessionKey: string,
): Promise<number> {
  await silenceDescendants(svc, sessionKey);
  return await stopSession(svc, sessionKey);
}
