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
}

/** Records are kept for 30 days; the indexes are trimmed to the newest 100k. */
const TTL_SECONDS = 30 * 24 * 3600;
const INDEX_CAP = 100_000;

export class DeliveryLog {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  /** Create the record once (a retried job keeps the original ts and attempts). */
  /**
   * Create the record once, in one MULTI: every field is set only if absent (HSETNX) and the
   * index entries only if absent (ZADD NX), so a retry after a crash completes a half-made
   * record instead of leaving it without its fields and index entries, and never resets the
   * status or attempts of one that exists.
   */
  async open(
    rec: Omit<DeliveryRecord, "status" | "attempts" | "ts" | "to"> & { to?: string; ts?: number },
    /** A delivery already settled without an attempt (no adapter, blocked): its outcome, in the same MULTI. */
    settled?: { status: DeliveryStatus; error: string },
  ): Promise<void> {
    const key = this.keys.delivery(rec.id);
    const ts = rec.ts ?? Date.now();
    const fields: Record<string, string> = {
      id: rec.id,
      message: rec.message,
      sessionKey: rec.sessionKey,
      kind: rec.kind,
      channel: rec.channel,
      ...(rec.to ? { to: rec.to } : {}),
      ...(rec.accountId ? { accountId: rec.accountId } : {}),
      ...(rec.threadId ? { threadId: rec.threadId } : {}),
      status: "pending",
      attempts: "0",
      ts: String(ts),
    };
    const m = this.redis.multi();
    for (const [f, v] of Object.entries(fields)) m.hsetnx(key, f, v);
    if (settled) m.hset(key, { status: settled.status, error: settled.error.slice(0, 500) });
    m.expire(key, TTL_SECONDS);
    m.zadd(this.keys.deliveryIndex(), "NX", ts, rec.id);
    m.zremrangebyrank(this.keys.deliveryIndex(), 0, -INDEX_CAP - 1);
    // The per-session and per-channel indexes drop what is older than a record lives, and go
    // with their last record: a deleted session's index does not outlive its deliveries.
    for (const index of [this.keys.deliveriesBySession(rec.sessionKey), this.keys.deliveriesByChannel(rec.channel)]) {
      m.zadd(index, "NX", ts, rec.id);
      m.zremrangebyscore(index, "-inf", `(${ts - TTL_SECONDS * 1000}`);
      m.zremrangebyrank(index, 0, -INDEX_CAP - 1);
      m.expire(index, TTL_SECONDS);
    }
    await m.exec();
  }

  async attempt(id: string, status: DeliveryStatus, error?: string): Promise<void> {
    const key = this.keys.delivery(id);
    const m = this.redis.multi().hincrby(key, "attempts", 1).hset(key, "status", status);
    if (error) m.hset(key, "error", error.slice(0, 500));
    else m.hdel(key, "error");
    await m.exec();
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
    const limit = Math.max(1, Math.min(q.limit ?? 50, 1000));
    const index = q.sessionKey
      ? this.keys.deliveriesBySession(q.sessionKey)
      : q.channel
        ? this.keys.deliveriesByChannel(q.channel)
        : this.keys.deliveryIndex();
    const out: DeliveryRecord[] = [];
    let offset = 0;
    while (out.length < limit) {
      const ids = await this.redis.zrevrange(index, offset, offset + limit * 2 - 1);
      if (ids.length === 0) break;
      offset += ids.length;
      const p = this.redis.pipeline();
      for (const id of ids) p.hgetall(this.keys.delivery(id));
      const res = (await p.exec()) ?? [];
      for (const [, h] of res) {
        const rec = h && (h as Record<string, string>).id ? decode(h as Record<string, string>) : null;
        if (rec && (!q.channel || rec.channel === q.channel) && (!q.sessionKey || rec.sessionKey === q.sessionKey))
          out.push(rec);
        if (out.length >= limit) break;
      }
    }
    return out;
  }
}

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
