/**
 * Sub-agent runs registered whose turn was never queued. A spawn registers its run (taking a
 * child slot) and then pushes the child's turn, in two steps; one cut off in between (its
 * process killed, a Redis error on the push, a crashed turn whose re-run spawns something else)
 * leaves a run that nothing runs and no announce job ends. Such a run is released:
 *
 * - by the spawn itself when its push fails (src/tools/sessions-spawn.ts);
 * - by a kill, which ends it as `killed` (src/tools/subagents-tool.ts);
 * - by a `/stop`, `sessions.reset` or `sessions.delete` of its requester (or of a session above
 *   it), or of its own child session, which end it as a kill does (src/subagents/descendants.ts);
 * - by itself otherwise: once it is older than UNQUEUED_GRACE_MS, the requester's next spawn
 *   at the `maxChildrenPerAgent` limit and its next `subagents` call drop it, and so does the
 *   maintenance sweep (`dropCutOffRuns`, over every run registered since this release), so a
 *   requester nobody acts for (an orchestrator waiting on the run) is not left waiting.
 *
 * The check that no turn was queued (no run record) is made in the same step as the release
 * (subagent-unqueued.lua). A spawn still alive past the grace period finds its run released
 * after its push, and stops the turn it queued (sessions-spawn.ts). A steer registers its new
 * run the same way (subagents-tool.ts); dropping one gives the run it replaced back its place
 * and its announce, so a steer cut off after its swap does not lose the child's result.
 *
 * Each end or drop owes the requester a release (an orchestrator may wait for the run), done in
 * later steps (releaseRequester). The same Lua step records it as owed; the release forgets it
 * once done, and the maintenance sweep does the releases still owed after RELEASE_OWED_GRACE_MS
 * (releaseOwed): a caller killed, or failed by Redis, in between no longer leaves an
 * orchestrator waiting for ever.
 */
import type { RotationDeps } from "../rotation/rotate.js";
import { deleteSession } from "../rotation/rotate.js";
import { identOf } from "../session/session-ident.js";
import type { RedisClient } from "../storage/redis-client.js";
import { redisTimeMs } from "../storage/redis-time.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { SubagentRegistry, type SubagentRun } from "./registry.js";
import { releaseRequester, type SubagentDeps } from "./announce.js";

/**
 * How long a registered run may be without its turn before it counts as cut off. A live spawn
 * pushes right after it registers (a few Redis round trips), so this is only a margin for a
 * slow process and for clocks that differ between hosts (createdAt is the spawning process's).
 */
export const UNQUEUED_GRACE_MS = 60_000;

/**
 * Drop each of `runs` that is registered as running, older than the grace period and has no
 * turn queued; a child session its spawn created for it alone is deleted with it. Returns the
 * runIds dropped.
 */
export async function releaseUnqueued(
  svc: Pick<RotationDeps, "sessions" | "queues" | "config"> & SubagentDeps,
  registry: SubagentRegistry,
  runs: SubagentRun[],
  now = Date.now(),
): Promise<Set<string>> {
  const released = new Set<string>();
  for (const run of runs) {
    if (run.status !== "running" || run.createdAt >= now - UNQUEUED_GRACE_MS) continue;
    if (await dropUnqueued(svc, registry, run, now - UNQUEUED_GRACE_MS)) released.add(run.runId);
  }
  return released;
}

export interface CutOffSweepResult {
  /** Registered runs looked at (registered before the grace period). */
  examined: number;
  /** Dropped: their turn was never queued. */
  dropped: number;
  /** Their drop failed (Redis): dated again, looked at by a later sweep. */
  failed: number;
}

/**
 * The maintenance sweep's part: drop the runs registered before the grace period whose turn was
 * never queued, oldest first, batch after batch of `limit` while batches come back full and
 * `budgetMs` is not spent, whoever their requester, so an orchestrator waiting on a cut-off leaf
 * is released without anybody's next spawn or `subagents` call. The age is judged on Redis's
 * clock alone (the set's scores and `now`), never against a spawning host's clock, so a host
 * whose clock runs ahead cannot drop a spawn still on its way. Every other run looked at (turn
 * queued, ended, gone with its TTL) is forgotten: its own turn and announce end it.
 */
export async function dropCutOffRuns(
  svc: Pick<RotationDeps, "sessions" | "queues" | "config"> & SubagentDeps,
  limit: number,
  opts: { now?: number; budgetMs?: number } = {},
): Promise<CutOffSweepResult> {
  const registry = new SubagentRegistry(svc.redis, svc.keys, svc.runs.ttlSeconds);
  const now = opts.now ?? (await redisTimeMs(svc.redis));
  const started = Date.now();
  const result: CutOffSweepResult = { examined: 0, dropped: 0, failed: 0 };
  for (;;) {
    const ids = await registry.registeredBefore(now - UNQUEUED_GRACE_MS, limit);
    result.examined += ids.length;
    const settled: string[] = [];
    for (const runId of ids) {
      try {
        const run = await registry.get(runId);
        // Registered long enough ago by the set's score: the drop's own check of the record's
        // createdAt (a spawning host's clock) is passed over.
        if (run?.status === "running" && (await dropUnqueued(svc, registry, run, Number.MAX_SAFE_INTEGER)))
          result.dropped++;
        settled.push(runId);
      } catch {
        result.failed++;
        // Behind the others: drops that keep failing must not keep the sweep from the rest. (A drop
        // done whose release failed is owed, and releaseOwed does it.)
        await registry.registeredAgain(runId, now).catch(() => undefined);
      }
    }
    await registry.forgetRegistered(settled);
    if (ids.length < limit || Date.now() - started >= (opts.budgetMs ?? 0)) return result;
  }
}

/** Drop `run` if it has no turn queued and was registered before `registeredBefore`; true if dropped. */
export async function dropUnqueued(
  svc: Pick<RotationDeps, "sessions" | "queues" | "config"> & SubagentDeps,
  registry: SubagentRegistry,
  run: SubagentRun,
  registeredBefore: number,
): Promise<boolean> {
  const dropped = await registry.dropUnqueued(run, registeredBefore);
  if (dropped !== "kept") await releaseRequester(svc, registry, run);
  // The session its spawn created: nothing ran in it (a fork's copied transcript is archived).
  if (dropped === "dropped-session")
    await deleteSession(svc, run.childSessionKey, identOf(svc.config, run.childSessionKey), { archive: true });
  return dropped !== "kept";
}

/**
 * End `run` at once, as `killed`, if its turn was never queued (nothing runs to stop, and no
 * announce job will end it), and release its requester: refused (false) for a run whose turn is
 * queued after all, which its own turn and announce end.
 *
 * - `killed`: a run a kill suppressed first (`subagents kill`, or the stop, reset or delete of a
 *   session above it): a child session its spawn asked to delete (`cleanup: "delete"`) goes with it.
 * - `own-session`: the run's own child session is being stopped, reset or deleted: suppressed as
 *   by a kill in the same step; the session is left to what was asked of it.
 */
export async function endUnqueued(
  svc: Pick<RotationDeps, "sessions" | "queues" | "config"> & Pick<SubagentDeps, "runs">,
  registry: SubagentRegistry,
  run: SubagentRun,
  by: "killed" | "own-session",
): Promise<boolean> {
  const now = Date.now();
  const ended = by === "killed" ? await registry.endUnqueued(run, now) : await registry.stopUnqueued(run, now);
  if (!ended) return false;
  await releaseRequester(svc, registry, run);
  if (by === "killed" && run.cleanup === "delete")
    await deleteSession(svc, run.childSessionKey, identOf(svc.config, run.childSessionKey), { archive: true });
  return true;
}

/**
 * How long an owed release is left to the caller that recorded it (which releases right after
 * the Lua step) before the sweep does it: only a margin for a slow caller. A release done twice
 * is harmless (releaseRequester is idempotent).
 */
export const RELEASE_OWED_GRACE_MS = 30_000;

export interface ReleaseOwedResult {
  /** Owed releases done (or found with nothing left to do) and forgotten. */
  released: number;
  /** Owed releases that failed again: kept for a later sweep. */
  failed: number;
}

/**
 * The maintenance sweep's part: do the releases recorded as owed (subagent-unqueued.lua) more
 * than RELEASE_OWED_GRACE_MS before `now` (Redis's clock, read when not given), the oldest first,
 * at most `limit`. One that fails stays owed (for a later sweep) and the others are still done.
 */
export async function releaseOwed(
  svc: Pick<SubagentDeps, "runs" | "queues" | "config"> & { redis: RedisClient; keys: RedisKeys },
  limit: number,
  now?: number,
): Promise<ReleaseOwedResult> {
  const registry = new SubagentRegistry(svc.redis, svc.keys, svc.runs.ttlSeconds);
  if (now === undefined) now = await redisTimeMs(svc.redis);
  const result: ReleaseOwedResult = { released: 0, failed: 0 };
  for (const { member, run } of await registry.owedReleases(now - RELEASE_OWED_GRACE_MS, limit)) {
    if (!run) {
      await registry.forgetOwed(member); // not a record this code wrote: nothing to release by it
      continue;
    }
    try {
      await releaseRequester(svc, registry, run);
      result.released++;
    } catch {
      result.failed++;
      // Looked at again a grace period later, behind the others: a batch's worth of releases
      // that keep failing would otherwise keep the sweep from ever reaching the rest.
      await registry.owedAgain(member, now).catch(() => undefined);
    }
  }
  return result;
}
