/**
 * The running sub-agents below a session, and silencing them when their requester is stopped.
 *
 * `/stop`, `sessions.reset` and `sessions.delete` stop a session's descendants with it. Their
 * announces are suppressed first (as `subagents kill` does, and as OpenClaw's stop of a
 * requester's sub-agents does): a "was killed" report would otherwise start a new turn in the
 * session right after its user said stop, and post it to the channel (or, after a reset, open
 * the new session with a leftover of the old one).
 *
 * A sub-agent run whose spawn was cut off before its turn was queued (src/subagents/unqueued.ts)
 * has nothing to stop: the stop ends it at once, as a kill does, whether it is below the session
 * or is the session's own run, rather than leaving it to hold its requester's child slot (and an
 * orchestrator waiting for it) until its grace period is over.
 */
import type { RunDeps } from "../runs/run-deps.js";
import { stopSession } from "../runs/stop.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { SubagentRegistry, type SubagentRun } from "./registry.js";
import { reportWaits, withOutcome } from "./run-state.js";
import { endUnqueued } from "./unqueued.js";

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

/**
 * `/stop`, `sessions.reset` and `sessions.delete`: the sub-agents below `sessionKey` are silenced,
 * then the session and they are stopped (src/runs/stop.ts), and runs with no turn queued are
 * ended (see the module comment). Returns how many runs were stopped or ended.
 */
export async function stopSessionAndSilence(
  svc: Parameters<typeof stopSession>[0] & DescendantDeps & { redis: RedisClient; keys: RedisKeys },
  sessionKey: string,
): Promise<number> {
  const registry = new SubagentRegistry(svc.redis, svc.keys, svc.runs.ttlSeconds);
  let ended = 0;
  // The session's own run (a sub-agent's session), before the stop: a spawn still alive that
  // queues its turn after this finds its run suppressed and stops that turn itself.
  const ownRunId = await registry.currentRunOf(sessionKey);
  const own = ownRunId ? await registry.get(ownRunId) : null;
  if (own && (await endUnqueued(svc, registry, own, "own-session"))) ended++;
  const below = await runningDescendants(svc, registry, sessionKey);
  const silenced: SubagentRun[] = [];
  for (const r of below) if ((await registry.suppressKilled(r.runId)) === "suppressed") silenced.push(r);
  const stopped = await stopSession(svc, sessionKey);
  // Refused for each run whose turn is queued: the stop just stopped it, and its announce ends it.
  for (const r of silenced) if (await endUnqueued(svc, registry, r, "killed")) ended++;
  return stopped + ended;
}
