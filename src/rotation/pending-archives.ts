/**
 * Retired transcripts awaiting their archive. A reset (or a delete) and the archive of the
 * transcript it retired are two steps: the rotation in Redis, then a job or the next turn that
 * renames the file. A crash, a failed push or a dead Redis connection between them used to leave
 * the old transcript live for good, under a sessionId nothing refers to any more.
 *
 * So the rotation itself records the retired sessionId (session-upsert.lua, session-delete.lua,
 * in the same script), whoever archives it removes the record afterwards, and the maintenance
 * sweep queues the archive job of any record older than a grace period. The job's id is derived
 * from the sessionId and an archive of a file already archived does nothing, so a record found
 * while its own archive is still on the way costs one idle job.
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { ArchiveJobData } from "../queues/jobs.js";
import { enqueueArchive, type RotationDeps } from "./rotate.js";

/** How long a record waits for the archive already on its way (a job, a queued turn) before the sweep queues one. */
export const PENDING_ARCHIVE_GRACE_MS = 5 * 60_000;

type PendingArchiveDeps = { redis: RedisClient; keys: RedisKeys };

/** The zset member the scripts write: `<kind>\n<agentId>\n<sessionId>\n<sessionKey>`. */
export function pendingArchiveMember(d: ArchiveJobData): string {
  return `${d.kind}\n${d.agentId}\n${d.sessionId}\n${d.sessionKey}`;
}

export function parsePendingArchive(member: string): ArchiveJobData | undefined {
  const [kind, agentId, sessionId, ...key] = member.split("\n");
  if ((kind !== "reset" && kind !== "deleted") || !agentId || !sessionId || key.length === 0) return undefined;
  return { kind, agentId, sessionId, sessionKey: key.join("\n") };
}

/** The transcript of `d` is archived (or was never written): forget the record. */
export async function archiveDone(svc: PendingArchiveDeps, d: ArchiveJobData): Promise<void> {
  await svc.redis.zrem(svc.keys.pendingArchives(), pendingArchiveMember(d));
}

/**
 * The sweep's part: queue the archive job of every record older than the grace period, at most
 * `limit` per sweep (the oldest first). Returns how many were queued.
 */
export async function requeuePendingArchives(
  svc: PendingArchiveDeps & Pick<RotationDeps, "queues" | "config">,
  limit: number,
  now = Date.now(),
): Promise<number> {
  const key = svc.keys.pendingArchives();
  const due = await svc.redis.zrangebyscore(key, "-inf", now - PENDING_ARCHIVE_GRACE_MS, "LIMIT", 0, limit);
  let queued = 0;
  for (const member of due) {
    const d = parsePendingArchive(member);
    if (!d) {
      await svc.redis.zrem(key, member); // not a record this code wrote: nothing to archive by it
      continue;
    }
    await enqueueArchive(svc, d);
    queued++;
  }
  return queued;
}
