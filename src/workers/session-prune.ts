/**
 * `session.maintenance` (OpenClaw's store maintenance, on Redis): a scheduled `prune` job on the
 * maintenance queue removes sessions idle longer than `pruneAfter`, then keeps each configured
 * agent to `maxEntries` sessions (oldest go first), and archives the transcripts of what it
 * removed as `.deleted.<ts>`. It reads only the candidates — the oldest end of the activity
 * indexes — so one run costs O(stale + excess), never O(all sessions), and a run handles at
 * most `maintenance.sweepBatch` removals (the next run continues).
 *
 * `mode: "warn"` (the default, as in OpenClaw) is the dry run: the job only reports what it
 * would remove (in its result and the log); `"enforce"` removes. `sessions.cleanup { dryRun }`
 * runs the same pass on demand. Sessions with turns queued or running are left for a later run,
 * and so is one with a message since it was picked: the delete checks both itself.
 */
import type { WorkerDeps } from "./worker-deps.js";
import { defaultAgentId } from "../config/agents.js";
import { enqueueArchive } from "../rotation/rotate.js";
import { JOBS } from "../queues/jobs.js";
import { identOf } from "../session/session-ident.js";

export const PRUNE_SCHEDULER_ID = "session-prune";

export interface PruneReport {
  dryRun: boolean;
  /** Idle longer than pruneAfter. */
  pruned: string[];
  /** Over maxEntries for their agent (oldest first). */
  capped: string[];
  /** Candidates left alone because a turn was queued or running. */
  busy: string[];
}

interface Candidate {
  key: string;
  reason: "pruned" | "capped";
  /** Its last activity (updatedAt) when it was picked: it is removed only if idle since. */
  lastActivity: number;
}

/** ZRANGE … WITHSCORES answers as [member, score] pairs. */
function pairs(flat: string[]): [string, number][] {
  const out: [string, number][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, Number(flat[i + 1])]);
  return out;
}

/** What pruning reads and deletes (also run by the `sessions.prune` RPC, outside a worker). */
export type PruneDeps = Pick<WorkerDeps, "config" | "log" | "redis" | "keys" | "inbox" | "sessions" | "queues">;

async function candidates(svc: PruneDeps, now: number, batch: number): Promise<Candidate[]> {
  const m = svc.config.session.maintenance!;
  const out: Candidate[] = [];
  const seen = new Set<string>();
  const stale = await svc.redis.zrangebyscore(
    svc.keys.updatedIndex(),
    "-inf",
    `(${now - m.pruneAfterMs}`,
    "WITHSCORES",
    "LIMIT",
    0,
    batch,
  );
  for (const [key, lastActivity] of pairs(stale)) {
    seen.add(key);
    out.push({ key, reason: "pruned", lastActivity });
  }
  const agents = new Set([defaultAgentId(svc.config), ...svc.config.agents.list.map((a) => a.id)]);
  for (const agentId of agents) {
    const index = svc.keys.agentIndex(agentId);
    const excess = (await svc.redis.zcard(index)) - m.maxEntries;
    if (excess <= 0) continue;
    // The oldest `excess` go (those already pruned for age are among them: same ordering).
    for (const [key, lastActivity] of pairs(
      await svc.redis.zrange(index, 0, Math.min(excess, batch) - 1, "WITHSCORES"),
    )) {
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ key, reason: "capped", lastActivity });
    }
  }
  return out.slice(0, batch);
}

export async function pruneOnce(svc: PruneDeps, opts: { dryRun?: boolean; now?: number } = {}): Promise<PruneReport> {
  const m = svc.config.session.maintenance;
  const dryRun = opts.dryRun ?? m?.mode !== "enforce";
  const report: PruneReport = { dryRun, pruned: [], capped: [], busy: [] };
  if (!m) return report;
  for (const c of await candidates(svc, opts.now ?? Date.now(), svc.config.maintenance.sweepBatch)) {
    if (c.key === "global" || c.key === "unknown") continue;
    if ((await svc.inbox.hasInflight(c.key)) || (await svc.inbox.depth(c.key)) > 0) {
      report.busy.push(c.key);
      continue;
    }
    if (!dryRun) {
      const { agentId, kind } = identOf(svc.config, c.key);
      // Checked again in the delete itself: a message since the pick keeps the session.
      const old = await svc.sessions.deleteIfIdleSince(c.key, agentId, kind, c.lastActivity);
      if (old === "busy") {
        report.busy.push(c.key);
        continue;
      }
      if (!old) continue;
      await enqueueArchive(svc, { sessionKey: c.key, agentId, sessionId: old.sessionId, kind: "deleted" });
    }
    report[c.reason].push(c.key);
  }
  if (dryRun && report.pruned.length + report.capped.length > 0) {
    svc.log.warn(
      { pruned: report.pruned.length, capped: report.capped.length },
      "session.maintenance (warn mode): sessions that enforce mode would remove",
    );
  }
  return report;
}

/** Runs with the sweep's cadence while `session.maintenance` is configured; removed otherwise. */
export async function ensurePruneScheduler(svc: WorkerDeps): Promise<void> {
  if (!svc.config.session.maintenance) {
    await svc.queues.maintenance.removeJobScheduler(PRUNE_SCHEDULER_ID);
    return;
  }
  await svc.queues.maintenance.upsertJobScheduler(
    PRUNE_SCHEDULER_ID,
    { every: svc.config.maintenance.sweepEveryMs },
    { name: JOBS.prune.name, data: {}, opts: JOBS.prune.options({}, svc.config) },
  );
}
