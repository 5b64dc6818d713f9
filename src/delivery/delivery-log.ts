/**
 * Every outbound message is recorded, whatever happens to it (`GET /v1/deliveries`, README "HTTP API"):
 * `pending` while it is being tried, then `delivered`, `failed` (after its retries), `no_route`
 * (no adapter for the channel) or `blocked` (sendPolicy deny).
 * A record always has `channel` and `to` (contract §4): with no route known at all the channel is
 * `none` and `to` is the empty string.
 */
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { DeliveryRoute } from "../session/stored-route.js";
import { CHAT_HISTORY_MAX_BYTES, HISTORY_MESSAGE_MAX_BYTES } from "../history/sanitize-history.js";
import { luaCommand } from "../storage/lua-script.js";
import { luaSafeJson } from "../text/well-formed.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

export type { DeliveryRoute };

export type DeliveryStatus = "pending" | "delivered" | "failed" | "no_route" | "blocked";

export interface DeliveryRecord extends DeliveryRoute {
  /** The recipient within the channel; `""` when no route was known (channel `none`). */
  to: string;
  id: string;
  message: string;
  sessionKey: string;
  kind: string;
  status: DeliveryStatus;
  attempts: number;
  ts: number;
  error?: string;
  /** Listed without its message, over the per-message bound: `message` is a placeholder. */
  truncated?: true;
  /** The message's size in bytes, when it was left out. */
  bytes?: number;
}

/** What a delivery's record is created from. */
export type NewDeliveryRecord = Omit<DeliveryRecord, "status" | "attempts" | "ts" | "to"> & {
  to?: string;
  ts?: number;
};

/** The job that sends a delivery: a delivery waiting behind it in its lane looks there whether it still lives. */
export interface DeliveryOwner {
  queue: string;
  jobId: string;
}

/** A delivery joining its chat's lane, and the job that sends it. */
export interface LaneJoin {
  id: string;
  owner: DeliveryOwner;
}

/** A lane's member as its record says: the job sending it, when that job was last seen on it. */
export interface LaneMember {
  id: string;
  owner: DeliveryOwner;
  /** ms; 0 when never noted. */
  seenAt: number;
  status: string;
}

/** lane_head's reply (delivery-lane.lua): {id, ownerQueue, ownerJob, seenAt, status}, or {} for none. */
function laneMember(raw: string[]): LaneMember | null {
  if (!raw.length) return null;
  const [id, queue, jobId, seenAt, status] = raw;
  return {
    id: id!,
    owner: { queue: queue ?? "", jobId: jobId ?? "" },
    seenAt: Number(seenAt) || 0,
    status: status ?? "",
  };
}

/** What a listed record's message reads when it is over the per-message bound. */
export const DELIVERY_OMITTED_TEXT = "[deliveries omitted: message too large]";

/** Records are kept for 30 days; the indexes are trimmed to the newest 100k. */
const TTL_SECONDS = 30 * 24 * 3600;
const INDEX_CAP = 100_000;

/**
 * Records read per round trip when listing: a page's pipeline (two commands a record, then the
 * messages) stays far below the gateway's bound on commands waiting for Redis
 * (`gateway.limits.maxPendingRedisCommands`, 1000), which a listing of 1000 records in one
 * pipeline passed, refusing other requests meanwhile.
 */
const LIST_PAGE_IDS = 100;

export class DeliveryLog {
  private readonly openLua;
  private readonly beginLua;
  private readonly attemptLua;
  private readonly laneDropLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {
    this.openLua = luaCommand(redis, LUA_DIR, "delivery-open");
    this.beginLua = luaCommand(redis, LUA_DIR, "delivery-begin");
    this.attemptLua = luaCommand(redis, LUA_DIR, "delivery-attempt");
    this.laneDropLua = luaCommand(redis, LUA_DIR, "delivery-lane-drop");
  }

  /**
   * Create the record once (a retried job keeps the original ts and attempts), in one step
   * (delivery-open.lua): a retry after a crash completes a half-made record and never resets
   * the status or attempts of one that exists. With `lane`, a delivery still to be sent joins its
   * chat's lane in the same step (docs/concepts/reliability.md, "Replies reach a chat in order").
   */
  async open(
    rec: NewDeliveryRecord,
    /** A delivery already settled without an attempt (no adapter, blocked): its outcome, in the same step. */
    settled?: { status: DeliveryStatus; error: string },
    lane?: LaneJoin,
  ): Promise<void> {
    await this.openLua(
      [...this.recordKeys(rec), ...(lane ? this.laneKeys(lane.id) : [])],
      [
        ...this.recordArgs(rec),
        settled?.status ?? "",
        settled ? settled.error.slice(0, 500) : "",
        rec.message,
        ...(lane ? [lane.owner.queue, lane.owner.jobId, Date.now()] : []),
      ],
    );
  }

  /**
   * An attempt begins (delivery-begin.lua): the record is made if it is missing, one already
   * delivered answers `delivered` (not to be sent again), one that failed for good answers
   * `failed` unless `retried` (its job was retried after it failed), any other is pending from
   * here. With `lane` it joins its chat's lane if it is not in it, and `behind` is the lane's
   * first member when that is another delivery (this one must wait), else null (send it).
   */
  async begin(
    rec: NewDeliveryRecord,
    lane: LaneJoin | undefined,
    retried: boolean,
  ): Promise<
    { status: "delivered" } | { status: "failed"; error: string } | { status: "pending"; behind: LaneMember | null }
  > {
    const res = (await this.beginLua(
      [...this.recordKeys(rec), ...(lane ? this.laneKeys(lane.id) : [])],
      [
        ...this.recordArgs(rec),
        retried ? "1" : "",
        "",
        rec.message,
        ...(lane ? [lane.owner.queue, lane.owner.jobId, Date.now(), this.keys.delivery("")] : []),
      ],
    )) as string[];
    if (res[0] === "delivered") return { status: "delivered" };
    if (res[0] === "failed") return { status: "failed", error: res[1] ?? "" };
    return { status: "pending", behind: res[1] === "behind" ? laneMember(res.slice(2)) : null };
  }

  /**
   * One attempt's outcome: `pending` (it failed and will be tried again) or the final status.
   * A settled delivery leaves its lane (`laneId`); when it was first there, the new first member
   * comes back, to be woken.
   */
  async attempt(id: string, status: DeliveryStatus, error?: string, laneId?: string): Promise<LaneMember | null> {
    return (await this.record(id, status, error, laneId && this.keys.deliveryLane(laneId), true, false)) ?? null;
  }

  /** A delivery settled without an attempt (blocked, no adapter): as `attempt`, counting none. */
  async settle(id: string, status: DeliveryStatus, error: string, laneId?: string): Promise<LaneMember | null> {
    return (await this.record(id, status, error, laneId && this.keys.deliveryLane(laneId), false, false)) ?? null;
  }

  /**
   * Settle `id` with `status` and `error` only if it is still pending, out of whatever lane its
   * record names (a job ending without posting it). `settled: false` when it was settled already;
   * `next` is the lane's new first member to wake.
   */
  async settleIfPending(
    id: string,
    status: DeliveryStatus,
    error: string,
  ): Promise<{ settled: boolean; next: LaneMember | null }> {
    // One script: the status checked and the lane its record names read inside it.
    const res = await this.record(id, status, error, undefined, false, true);
    return res === undefined ? { settled: false, next: null } : { settled: true, next: res };
  }

  /**
   * Take `member`, the first of lane `laneId`, out of it: its job is gone (delivery-lane-drop.lua).
   * Only if its record is as the caller read it (`kept`: its job was seen working on it since);
   * still pending, it is settled `failed` with `error`. `dropped`: this call took it out (false:
   * it was out already). `next`: the lane's first member after it.
   */
  async dropFromLane(
    laneId: string,
    member: LaneMember,
    error: string,
  ): Promise<"kept" | { dropped: boolean; next: LaneMember | null }> {
    const res = await this.laneDropLua(
      [this.keys.deliveryLane(laneId), this.keys.delivery(member.id)],
      [member.id, member.seenAt ? String(member.seenAt) : "", error.slice(0, 500), this.keys.delivery("")],
    );
    if (res === 0) return "kept";
    const [what, ...head] = res as string[];
    return { dropped: what === "dropped", next: laneMember(head) };
  }

  /** delivery-attempt.lua; undefined when `onlyIfPending` found it settled already. */
  private async record(
    id: string,
    status: DeliveryStatus,
    error: string | undefined,
    laneKey: string | undefined,
    countAttempt: boolean,
    onlyIfPending: boolean,
  ): Promise<LaneMember | null | undefined> {
    const res = await this.attemptLua(
      [this.keys.delivery(id), ...(laneKey ? [laneKey] : [])],
      [
        status,
        error ? error.slice(0, 500) : "",
        id,
        this.keys.delivery(""),
        countAttempt ? "1" : "0",
        onlyIfPending ? "1" : "0",
      ],
    );
    return res === 0 ? undefined : laneMember(res as string[]);
  }

  private recordKeys(rec: NewDeliveryRecord): string[] {
    return [
      this.keys.delivery(rec.id),
      this.keys.deliveryIndex(),
      this.keys.deliveriesBySession(rec.sessionKey),
      this.keys.deliveriesByChannel(rec.channel),
    ];
  }

  private laneKeys(laneId: string): string[] {
    return [this.keys.deliveryLane(laneId), this.keys.deliveryLaneSeq()];
  }

  /** delivery-record.lua's arguments but the settled outcome and the message (ARGV[1..6]). */
  private recordArgs(rec: NewDeliveryRecord): (string | number)[] {
    const ts = rec.ts ?? Date.now();
    // Field, value pairs (the message apart: the script does not decode it, it may be large).
    const fields = ["id", rec.id, "sessionKey", rec.sessionKey, "kind", rec.kind, "channel", rec.channel];
    if (rec.to) fields.push("to", rec.to);
    if (rec.accountId) fields.push("accountId", rec.accountId);
    if (rec.threadId) fields.push("threadId", rec.threadId);
    fields.push("status", "pending", "attempts", "0", "ts", String(ts));
    return [luaSafeJson(fields), rec.id, ts, TTL_SECONDS, INDEX_CAP, ts - TTL_SECONDS * 1000];
  }

  async setStatus(id: string, status: DeliveryStatus, error?: string): Promise<void> {
    await this.redis.hset(this.keys.delivery(id), { status, ...(error ? { error: error.slice(0, 500) } : {}) });
  }

  async get(id: string): Promise<DeliveryRecord | null> {
    const h = await this.redis.hgetall(this.keys.delivery(id));
    return h.id ? decode(h) : null;
  }

  /** Newest first, from the narrowest index; both filters may be combined. */
  async list(q: { sessionKey?: string; channel?: string; limit?: number }): Promise<DeliveryRecord[]> {
    return (await this.listBounded(q)).records;
  }

  /**
   * `list` within chat.history's bounds (its 128 KB per message and 6 MB per answer): a message
   * over the first is not even read from Redis and comes back as a placeholder with
   * `truncated: true` and its size; records past the second are left out (`more`: the caller
   * may narrow the filter or the limit). Without them 50 replies of 1 MB answered 52 MB, and
   * `limit=1000` failed at V8's string limit.
   */
  async listBounded(
    q: { sessionKey?: string; channel?: string; limit?: number },
    bounds: { messageBytes?: number; answerBytes?: number } = {},
  ): Promise<{ records: DeliveryRecord[]; more: boolean }> {
    const messageBytes = bounds.messageBytes ?? HISTORY_MESSAGE_MAX_BYTES;
    const answerBytes = bounds.answerBytes ?? CHAT_HISTORY_MAX_BYTES;
    const limit = Math.max(1, Math.min(q.limit ?? 50, 1000));
    const index = q.sessionKey
      ? this.keys.deliveriesBySession(q.sessionKey)
      : q.channel
        ? this.keys.deliveriesByChannel(q.channel)
        : this.keys.deliveryIndex();
    const out: DeliveryRecord[] = [];
    let total = 2; // the array's brackets
    let offset = 0;
    while (out.length < limit) {
      const ids = await this.redis.zrevrange(index, offset, offset + Math.min(limit * 2, LIST_PAGE_IDS) - 1);
      if (ids.length === 0) break;
      offset += ids.length;
      // Every field but the message, and the message's size in bytes.
      const p = this.redis.pipeline();
      for (const id of ids) {
        p.hmget(this.keys.delivery(id), ...RECORD_FIELDS);
        p.hstrlen(this.keys.delivery(id), "message");
      }
      const res = (await p.exec()) ?? [];
      const found: { h: Record<string, string>; bytes: number }[] = [];
      for (let i = 0; i < ids.length; i++) {
        const values = (res[2 * i]?.[1] ?? []) as (string | null)[];
        const h: Record<string, string> = {};
        RECORD_FIELDS.forEach((f, j) => {
          if (values[j] != null) h[f] = values[j]!;
        });
        if (!h.id) continue;
        if ((q.channel && h.channel !== q.channel) || (q.sessionKey && h.sessionKey !== q.sessionKey)) continue;
        found.push({ h, bytes: Number(res[2 * i + 1]?.[1] ?? 0) });
        if (out.length + found.length >= limit) break;
      }
      const small = found.filter((f) => f.bytes <= messageBytes);
      const m = this.redis.pipeline();
      for (const f of small) m.hget(this.keys.delivery(f.h.id!), "message");
      const messages = small.length ? ((await m.exec()) ?? []) : [];
      small.forEach((f, i) => {
        f.h.message = (messages[i]?.[1] as string | null) ?? "";
      });
      for (const f of found) {
        const rec = decode(f.h);
        if (f.bytes > messageBytes)
          Object.assign(rec, { message: DELIVERY_OMITTED_TEXT, truncated: true, bytes: f.bytes });
        const size = Buffer.byteLength(JSON.stringify(rec)) + 1;
        if (total + size > answerBytes) return { records: out, more: true };
        total += size;
        out.push(rec);
      }
    }
    return { records: out, more: false };
  }
}

/** Every stored field of a record but `message` (read only when it is within the bounds). */
const RECORD_FIELDS = [
  "id",
  "channel",
  "to",
  "accountId",
  "threadId",
  "sessionKey",
  "kind",
  "status",
  "attempts",
  "ts",
  "error",
] as const;

function decode(h: Record<string, string>): DeliveryRecord {
  return {
    id: h.id!,
    channel: h.channel ?? "",
    // Stored only when known; read back always (an empty string when there was no route).
    to: h.to ?? "",
    ...(h.accountId ? { accountId: h.accountId } : {}),
    ...(h.threadId ? { threadId: h.threadId } : {}),
    message: h.message ?? "",
    sessionKey: h.sessionKey ?? "",
    kind: h.kind ?? "reply",
    status: (h.status ?? "pending") as DeliveryStatus,
    attempts: Number(h.attempts ?? 0),
    ts: Number(h.ts ?? 0),
    ...(h.error ? { error: h.error } : {}),
  };
}
