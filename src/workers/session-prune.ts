/**
 * `session.maintenance` (OpenClaw's store maintenance, on Redis): a scheduled `prune` job on the
 * maintenance queue removes sessions idle longer than `pruneAfter`, then keeps each configured
 * agent to `maxEntries` sessions (oldest go first), and archives the transcripts of what it
 * removed as `.deleted.<ts>`. It reads only the candidates — the oldest end of the activity
 * indexes — so a batch costs O(batch), never O(all sessions). A batch handles at most
 * `maintenance.sweepBatch` removals; the job goes batch after batch within half its interval,
 * as the reset sweep does (`pruneDue`), so a backlog is not worked off at one batch per run.
 *
 * Activity is `updatedAt` (the activity indexes' score): the last message or turn, or an
 * operator's `sessions.reset` (a touch, as in OpenClaw). A sweep's rollover is not activity: a
 * session nobody uses is pruned whether or not the sweep rolled it over
 * (docs/concepts/session-reset.md).
 *
 * The same pass deletes the archives of retired transcripts (`<file>.reset.<ts>` older than
 * `resetArchiveRetention`, default pruneAfter, `false` keeps them; `<file>.deleted.<ts>` older
 * than pruneAfter), as OpenClaw's maintenance does: every daily rollover leaves one, so kept
 * forever they fill `storage.dir`. See `expiredArchives`.
 *
 * `mode: "warn"` (the default, as in OpenClaw) is the dry run: the job only reports what it
 * would remove (in its result and the log); `"enforce"` removes. `sessions.cleanup { dryRun }`
 * runs the same pass on demand. Sessions with turns queued or running are left for a later run,
 * and so is one with a message since it was picked: the delete checks both itself.
 */
import { opendir, unlink } from "node:fs/promises";
import { join, relative } from "node:path";
import type { WorkerDeps } from "./worker-deps.js";
import type { Config } from "../config/schema.js";
import { defaultAgentId } from "../config/agents.js";
import { enqueueArchive } from "../rotation/rotate.js";
import { JOBS } from "../queues/jobs.js";
import { identOf } from "../session/session-ident.js";
import { sessionsDir } from "../transcript/paths.js";

export const PRUNE_SCHEDULER_ID = "session-prune";

export interface PruneReport {
  dryRun: boolean;
  /** Idle longer than pruneAfter. */
  pruned: string[];
  /** Over maxEntries for their agent (oldest first). */
  capped: string[];
  /** Candidates left alone because a turn was queued or running. */
  busy: string[];
  /** Transcript archives past their retention (paths under `storage.dir`): deleted, or in a dry run would be. */
  archives: string[];
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
  for (const agentId of configuredAgents(svc.config)) {
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

/** One batch (also `sessions.cleanup`): at most `maintenance.sweepBatch` sessions and as many archives. */
export async function pruneOnce(svc: PruneDeps, opts: { dryRun?: boolean; now?: number } = {}): Promise<PruneReport> {
  return (await pruneBatch(svc, opts)).report;
}

/** A batch, and whether it took all it could (sessions, archives): more may be due then. */
async function pruneBatch(
  svc: PruneDeps,
  opts: { dryRun?: boolean; now?: number },
): Promise<{ report: PruneReport; sessionsFull: boolean; archivesFull: boolean }> {
  const m = svc.config.session.maintenance;
  const dryRun = opts.dryRun ?? m?.mode !== "enforce";
  const report: PruneReport = { dryRun, pruned: [], capped: [], busy: [], archives: [] };
  if (!m) return { report, sessionsFull: false, archivesFull: false };
  const now = opts.now ?? Date.now();
  const batch = svc.config.maintenance.sweepBatch;
  const picked = await candidates(svc, now, batch);
  for (const c of picked) {
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
  const expired = await expiredArchives(svc.config, now, batch);
  for (const file of expired) {
    if (!dryRun) {
      try {
        await unlink(file);
      } catch (err) {
        // Gone already (a concurrent `sessions.cleanup`): nothing to delete, nothing to report.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw err;
      }
    }
    report.archives.push(relative(svc.config.storage.dir, file));
  }
  if (dryRun && report.pruned.length + report.capped.length + report.archives.length > 0) {
    svc.log.warn(
      { pruned: report.pruned.length, capped: report.capped.length, archives: report.archives.length },
      "session.maintenance (warn mode): sessions and transcript archives that enforce mode would remove",
    );
  } else if (report.archives.length > 0) {
    svc.log.info({ archives: report.archives.length }, "session.maintenance: deleted expired transcript archives");
  }
  return { report, sessionsFull: picked.length >= batch, archivesFull: expired.length >= batch };
}

export interface PruneRunResult {
  dryRun: boolean;
  pruned: number;
  capped: number;
  /** Candidates left for a later run (turns queued or running, or a message since the pick). */
  busy: number;
  archives: number;
  /** Batches of `maintenance.sweepBatch` done by this run. */
  batches: number;
  /** Sessions still idle longer than pruneAfter when the run stopped: a backlog the next run takes on. */
  remaining: number;
}

/**
 * The prune job: batch after batch while a batch came back full and removed something, and
 * `budgetMs` (half the interval, as the reset sweep) is not spent; then how many sessions are
 * still past pruneAfter. Progress goes to the log after each batch that leaves more to do.
 * The dry run (warn mode) removes nothing, so its next batch would read the same candidates:
 * it does one. Counts, not keys, are returned: a run's keys could be many batches' worth.
 */
export async function pruneDue(
  svc: PruneDeps,
  budgetMs: number,
  onBatch: (done: PruneRunResult) => Promise<unknown> = async () => undefined,
): Promise<PruneRunResult> {
  const started = Date.now();
  const total: PruneRunResult = {
    dryRun: svc.config.session.maintenance?.mode !== "enforce",
    pruned: 0,
    capped: 0,
    busy: 0,
    archives: 0,
    batches: 0,
    remaining: 0,
  };
  if (!svc.config.session.maintenance) return total;
  for (;;) {
    const { report, sessionsFull, archivesFull } = await pruneBatch(svc, {});
    total.pruned += report.pruned.length;
    total.capped += report.capped.length;
    total.busy += report.busy.length;
    total.archives += report.archives.length;
    total.batches++;
    await onBatch(total);
    // A full batch that removed nothing (all busy, or gone meanwhile) would read the same ones again.
    const more =
      (sessionsFull && report.pruned.length + report.capped.length > 0) || (archivesFull && report.archives.length > 0);
    if (report.dryRun || !more) break;
    if (Date.now() - started >= budgetMs) break;
    svc.log.info(
      { batches: total.batches, pruned: total.pruned, capped: total.capped, archives: total.archives },
      "session.maintenance: batch done, more due: next batch",
    );
  }
  total.remaining = await idlePastPruneAfter(svc, Date.now());
  if (!total.dryRun && total.remaining > 0)
    svc.log.info(
      { remaining: total.remaining, batches: total.batches, pruned: total.pruned, capped: total.capped },
      "session.maintenance: sessions still idle past pruneAfter after this run (the next run goes on)",
    );
  return total;
}

/** How many sessions (the reserved `global` and `unknown` aside, never pruned) are idle past pruneAfter. */
async function idlePastPruneAfter(svc: PruneDeps, now: number): Promise<number> {
  const m = svc.config.session.maintenance;
  if (!m) return 0;
  const cutoff = now - m.pruneAfterMs;
  const index = svc.keys.updatedIndex();
  const [count, ...reserved] = await Promise.all([
    svc.redis.zcount(index, "-inf", `(${cutoff}`),
    svc.redis.zscore(index, "global"),
    svc.redis.zscore(index, "unknown"),
  ]);
  return count - reserved.filter((score) => score !== null && Number(score) < cutoff).length;
}

function configuredAgents(config: Config): Set<string> {
  return new Set([defaultAgentId(config), ...config.agents.list.map((a) => a.id)]);
}

/**
 * `<file>.reset.<ts>` / `<file>.deleted.<ts>` (src/transcript/paths.ts `archivePath`): the
 * archive kind and when it was archived, from the name (`:` written as `-`). The file's mtime
 * would be the transcript's last write, not its retirement. A live transcript ends in `.jsonl`
 * and never matches.
 */
const ARCHIVE_NAME_RE = /\.jsonl\.(reset|deleted)\.(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2}(?:\.\d{1,9})?)Z$/;

/** When an archive named `name` was archived, and its kind; undefined for any other file. */
export function archiveOf(name: string): { kind: "reset" | "deleted"; archivedAt: number } | undefined {
  const m = ARCHIVE_NAME_RE.exec(name);
  if (!m) return undefined;
  const archivedAt = Date.parse(`${m[2]}T${m[3]}:${m[4]}:${m[5]}Z`);
  return Number.isNaN(archivedAt) ? undefined : { kind: m[1] as "reset" | "deleted", archivedAt };
}

/**
 * Archives under the configured agents' sessions dirs past their retention, at most `limit` of
 * them (the run's batch, `maintenance.sweepBatch`; the next run takes the rest). Only those
 * dirs are read, each listed as a stream, and only archive names are considered: live
 * transcripts and any other file are never candidates.
 */
async function expiredArchives(config: Config, now: number, limit: number): Promise<string[]> {
  const m = config.session.maintenance;
  if (!m) return [];
  const retention = m.resetArchiveRetention === false ? undefined : (m.resetArchiveRetention ?? m.pruneAfterMs);
  const out: string[] = [];
  for (const agentId of configuredAgents(config)) {
    const dirPath = sessionsDir(config.storage.dir, agentId);
    let dir: Awaited<ReturnType<typeof opendir>>;
    try {
      dir = await opendir(dirPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue; // no transcripts yet
      throw err;
    }
    // Leaving the loop early (limit reached) closes the directory.
    for await (const dirent of dir) {
      if (!dirent.isFile()) continue;
      const archive = archiveOf(dirent.name);
      if (!archive) continue;
      const keepMs = archive.kind === "reset" ? retention : m.pruneAfterMs;
      if (keepMs === undefined || archive.archivedAt >= now - keepMs) continue;
      out.push(join(dirPath, dirent.name));
      if (out.length >= limit) return out;
    }
  }
  return out;
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
