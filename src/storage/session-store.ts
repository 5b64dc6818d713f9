/**
 * The session index in Redis. One JSON entry per session key plus sorted-set and hash indexes,
 * all maintained by one Lua script per write, so concurrent writers on any number of hosts
 * never lose an update and the indexes never disagree with the entries.
 *
 * Reads the tools need are served from the indexes in O(limit): newest-first over all sessions,
 * per agent or per kind, by sessionId, by unique label, children of a parent, and due-stale.
 */
import { luaSafeJson } from "../text/well-formed.js";
import type { RedisClient } from "./redis-client.js";
import { SessionNotFoundError, ValidationError, fromScriptError } from "../errors/index.js";
import { luaCommand } from "./lua-script.js";
import { RedisKeys } from "./redis-keys.js";
import {
  type KnownEntry,
  knownFrom,
  type SessionEntry,
  type SessionEntryPatch,
  type SessionKind,
} from "../session/session-entry.js";

const LUA_DIR = new URL("./lua/", import.meta.url);

export interface UpsertOptions {
  /** "touch" (default) moves updatedAt forward to now; "preserve" keeps it (metadata-only). */
  activity?: "touch" | "preserve";
  /** When the session goes stale (ms), null for never; omitted leaves the stale index alone. */
  staleAt?: number | null;
  /** Numeric fields to add to atomically (token counters). */
  increment?: Partial<Record<"inputTokens" | "outputTokens" | "totalTokens" | "contextTokens", number>>;
  /** "upsert" (default), "create" (fail if it exists), "update" (fail if missing). */
  mode?: "upsert" | "create" | "update";
  /** Compare-and-set: fail with SessionConflictError unless the stored sessionId is this one. */
  expectSessionId?: string;
  /** Compare-and-set on any change: fail with SessionConflictError unless `rev` is still this. */
  expectRev?: number;
  /** Fail with code `session_busy` while the session has queued or in-flight turns. */
  requireIdle?: boolean;
  /**
   * A sessionId this write retires (a reset) is recorded as awaiting its archive, in the same
   * step (src/rotation/pending-archives.ts): off for a rotation whose old transcript stays.
   */
  archiveRetired?: boolean;
  now?: number;
}

export interface ListQuery {
  agentId?: string;
  kinds?: SessionKind[];
  /** Only sessions updated within the last N minutes. */
  activeMinutes?: number;
  limit?: number;
  /** Only children of this session (spawnedBy). */
  spawnedBy?: string;
  /** With `spawnedBy`: how many generations below it (1, the default: direct children only). */
  spawnedByDepth?: number;
  label?: string;
  /** Case-insensitive substring over key, label, displayName, subject, sessionId. */
  search?: string;
  /** Include the reserved `global` / `unknown` sessions (never listed by tools). */
  includeReserved?: boolean;
  /**
   * Only sessions of agents this accepts (a caller's agent-to-agent allow list): applied while
   * the index is read, so `limit` counts rows the caller may see.
   */
  agentAllowed?: (agentId: string) => boolean;
  /**
   * Rows to skip (newest first) before `limit` rows are returned: `sessions.list`'s `offset`, kept
   * for older clients. O(offset + limit), and shifted by updates between pages: `page` is stable.
   */
  offset?: number;
  now?: number;
}

/**
 * Where a cursor page stopped: the index position (score as Redis wrote it, member) of the last
 * row it read. Positions only move forward in time for a session (updatedAt never goes back), so
 * a listing oldest first by cursor meets every session that exists throughout it; a session
 * updated after it was listed moves past the cursor and is met again (callers de-duplicate by key).
 */
interface ListCursor {
  score: string;
  key: string;
}

/** One page of `SessionStore.page`: `nextCursor` is absent once the index has no more rows. */
export interface SessionPage {
  sessions: SessionEntry[];
  /** Opaque (`encodeListCursor`): pass it back as `cursor` for the next page. */
  nextCursor?: string;
}

/** The order of a cursor listing, and where the next page starts. */
export interface PageQuery extends ListQuery {
  order?: "newest" | "oldest";
  /** A `nextCursor` an earlier page (same filters, same order) returned. */
  cursor?: string;
}

/** A cursor as callers carry it: opaque (base64url of the position), any key in any index fits. */
function encodeListCursor(c: ListCursor): string {
  return Buffer.from(JSON.stringify([c.score, c.key])).toString("base64url");
}

function decodeListCursor(text: string): ListCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== "string" ||
    typeof parsed[1] !== "string" ||
    Number.isNaN(scoreNumber(parsed[0]))
  )
    throw new ValidationError("cursor: not a cursor a session listing returned (nextCursor)");
  return { score: parsed[0], key: parsed[1] };
}

/** A score as Redis prints it ("inf" and "-inf" included) as a number. */
function scoreNumber(score: string): number {
  if (score === "inf" || score === "+inf") return Number.POSITIVE_INFINITY;
  if (score === "-inf") return Number.NEGATIVE_INFINITY;
  return score.trim() === "" ? Number.NaN : Number(score);
}

/** Redis orders members of equal score by their bytes. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** How far a filtered list may page through an index before it stops (documented limit). */
export const LIST_SCAN_LIMIT = 10_000;
/**
 * The deepest a spawn lineage can go: `maxSpawnDepth` is at most 5 in the config schema, so a
 * session is at most 5 `spawnedBy` hops below a session nobody spawned. Lineage walks stop here
 * whatever the data says (see docs/concepts/subagents.md, Visibility).
 */
export const MAX_LINEAGE_DEPTH = 5;
const PAGE = 200;
/** `global` and `unknown`: stored like sessions, left out of listings unless asked for. */
const RESERVED_KEYS = 2;

export class SessionStore {
  readonly keys: RedisKeys;
  private readonly upsertLua;
  private readonly deleteLua;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new RedisKeys(prefix);
    this.upsertLua = luaCommand(redis, LUA_DIR, "session-upsert");
    this.deleteLua = luaCommand(redis, LUA_DIR, "session-delete");
  }

  async get(sessionKey: string): Promise<SessionEntry | null> {
    return (await this.getKnown(sessionKey))?.entry ?? null;
  }

  /** The entry with its JSON exactly as stored (what a push can check it against), or null. */
  async getKnown(sessionKey: string): Promise<KnownEntry | null> {
    return knownFrom(await this.redis.get(this.keys.session(sessionKey)));
  }

  async require(sessionKey: string): Promise<SessionEntry> {
    const entry = await this.get(sessionKey);
    if (!entry) throw new SessionNotFoundError(sessionKey);
    return entry;
  }

  async getMany(sessionKeys: string[]): Promise<(SessionEntry | null)[]> {
    if (sessionKeys.length === 0) return [];
    const raws = await this.redis.mget(sessionKeys.map((k) => this.keys.session(k)));
    return raws.map((r) => (r ? (JSON.parse(r) as SessionEntry) : null));
  }

  async keyForSessionId(sessionId: string): Promise<string | null> {
    return await this.redis.hget(this.keys.sessionIdIndex(), sessionId);
  }

  async keyForLabel(agentId: string, label: string): Promise<string | null> {
    return await this.redis.hget(this.keys.labelIndex(agentId), label);
  }

  async isChildOf(parentKey: string, childKey: string): Promise<boolean> {
    return (await this.redis.zscore(this.keys.childrenIndex(parentKey), childKey)) !== null;
  }

  async childKeys(parentKey: string): Promise<string[]> {
    return await this.redis.zrange(this.keys.childrenIndex(parentKey), 0, -1);
  }

  /**
   * Whether `ancestorKey` spawned `targetKey`, directly or through its descendants: a walk up the
   * target's stored `spawnedBy` lineage (written once, never changed), at most
   * MAX_LINEAGE_DEPTH reads. A deleted session in between cuts the line, as it does for
   * `descendantKeys`.
   */
  async isDescendantOf(ancestorKey: string, targetKey: string): Promise<boolean> {
    if (targetKey === ancestorKey) return false;
    let key = targetKey;
    for (let hop = 0; hop < MAX_LINEAGE_DEPTH; hop++) {
      const parent = (await this.get(key))?.spawnedBy;
      if (!parent) return false;
      if (parent === ancestorKey) return true;
      key = parent;
    }
    return false;
  }

  /**
   * Everything `rootKey` spawned and what those spawned, down to `maxDepth` generations, from
   * the children indexes (one read per session visited, breadth first, one round trip per
   * generation). Stops after LIST_SCAN_LIMIT keys.
   */
  async descendantKeys(rootKey: string, maxDepth = MAX_LINEAGE_DEPTH): Promise<string[]> {
    const seen = new Set<string>([rootKey]);
    const out: string[] = [];
    let frontier = [rootKey];
    for (let depth = 0; depth < Math.min(maxDepth, MAX_LINEAGE_DEPTH) && frontier.length > 0; depth++) {
      const pipe = this.redis.pipeline();
      for (const k of frontier) pipe.zrange(this.keys.childrenIndex(k), 0, -1);
      const next: string[] = [];
      for (const [err, keys] of (await pipe.exec()) ?? []) {
        if (err) throw err;
        for (const k of keys as string[]) {
          if (seen.has(k)) continue;
          seen.add(k);
          next.push(k);
          out.push(k);
          if (out.length >= LIST_SCAN_LIMIT) return out;
        }
      }
      frontier = next;
    }
    return out;
  }

  /**
   * Merge `patch` into the entry for `sessionKey` atomically. `agentId` and `kind` decide which
   * indexes hold the key; they come from the key itself and never change for a key.
   */
  async upsert(
    sessionKey: string,
    ident: { agentId: string; kind: SessionKind },
    patch: SessionEntryPatch,
    opts: UpsertOptions = {},
  ): Promise<SessionEntry> {
    const now = opts.now ?? Date.now();
    // Object.assign, not a spread: docs/development.md, "Copies on the hot path".
    const full: SessionEntryPatch = Object.assign({}, patch, { agentId: ident.agentId, kind: ident.kind });
    const staleArg = opts.staleAt === undefined ? "keep" : opts.staleAt === null ? "" : String(opts.staleAt);
    const hasParent = typeof patch.spawnedBy === "string";
    const childKey = this.keys.childrenIndex(hasParent ? (patch.spawnedBy as string) : "");
    try {
      const out = (await this.upsertLua(this.upsertKeys(sessionKey, ident, childKey), [
        luaSafeJson(full),
        now,
        opts.activity ?? "touch",
        staleArg,
        opts.increment ? JSON.stringify(opts.increment) : "",
        sessionKey,
        opts.mode ?? "upsert",
        opts.expectSessionId ?? "",
        hasParent ? "1" : "",
        opts.requireIdle ? "1" : "",
        opts.expectRev !== undefined ? String(opts.expectRev) : "",
        opts.archiveRetired ? "1" : "",
      ])) as string;
      return JSON.parse(out) as SessionEntry;
    } catch (err) {
      throw fromScriptError(err, { sessionKey, label: String(patch.label) });
    }
  }

  /** The KEYS of session-upsert.lua: all under the `{prefix}` hash tag (one Cluster slot). */
  upsertKeys(
    sessionKey: string,
    ident: { agentId: string; kind: SessionKind },
    childKey = this.keys.childrenIndex(""),
  ): string[] {
    return [
      this.keys.session(sessionKey),
      this.keys.updatedIndex(),
      this.keys.agentIndex(ident.agentId),
      this.keys.kindIndex(ident.kind),
      this.keys.sessionIdIndex(),
      this.keys.labelIndex(ident.agentId),
      this.keys.staleIndex(),
      childKey,
      this.keys.inbox(sessionKey),
      this.keys.inflight(sessionKey),
      this.keys.pendingArchives(),
    ];
  }

  /**
   * Delete the session. With `archive`, its transcript is recorded as awaiting its `deleted`
   * archive in the same step (src/rotation/pending-archives.ts); the caller then queues the job.
   */
  async delete(
    sessionKey: string,
    agentId: string,
    kind: SessionKind,
    opts: { archive?: boolean } = {},
  ): Promise<SessionEntry | null> {
    return (await this.deleteWhere(sessionKey, agentId, kind, "", opts.archive === true)) as SessionEntry | null;
  }

  /**
   * Delete the session only if it has been idle since `lastActivity` (ms) at the latest and has
   * no turn queued or in flight, checked in the delete itself: "busy" otherwise (the prune picked
   * it by that time, and a message since then must keep it). Its transcript is recorded as
   * awaiting its archive, as `delete` with `archive` does.
   */
  async deleteIfIdleSince(
    sessionKey: string,
    agentId: string,
    kind: SessionKind,
    lastActivity: number,
  ): Promise<SessionEntry | null | "busy"> {
    return await this.deleteWhere(sessionKey, agentId, kind, String(lastActivity), true);
  }

  private async deleteWhere(
    sessionKey: string,
    agentId: string,
    kind: SessionKind,
    idleSince: string,
    archive: boolean,
  ): Promise<SessionEntry | null | "busy"> {
    const raw = (await this.deleteLua(
      [
        this.keys.session(sessionKey),
        this.keys.updatedIndex(),
        this.keys.agentIndex(agentId),
        this.keys.kindIndex(kind),
        this.keys.sessionIdIndex(),
        this.keys.labelIndex(agentId),
        this.keys.staleIndex(),
        this.keys.inbox(sessionKey),
        this.keys.inflight(sessionKey),
        this.keys.pendingArchives(),
      ],
      [sessionKey, `${this.keys.base}:idx:children:`, idleSince, archive ? "1" : "", Date.now()],
    )) as string | null;
    if (raw === "BUSY") return "busy";
    return raw ? (JSON.parse(raw) as SessionEntry) : null;
  }

  /** Sessions whose stale instant has passed, oldest first: the sweep's work list. */
  async dueStale(now: number, limit: number): Promise<string[]> {
    return await this.redis.zrangebyscore(this.keys.staleIndex(), "-inf", now, "LIMIT", 0, limit);
  }

  async count(agentId?: string): Promise<number> {
    return await this.redis.zcard(agentId ? this.keys.agentIndex(agentId) : this.keys.updatedIndex());
  }

  /**
   * Newest first. Unfiltered queries cost O(limit); filters (search, label, several kinds with
   * an agent) page through the chosen index and stop after LIST_SCAN_LIMIT keys.
   */
  async list(q: ListQuery = {}): Promise<SessionEntry[]> {
    const limit = Math.max(1, Math.min(q.limit ?? 1000, 10_000));
    // A page past the first: the first `offset + limit` rows minus the skipped ones, O(offset + limit).
    const offset = Math.max(0, Math.floor(q.offset ?? 0));
    return offset === 0 ? await this.listFirst(q, limit) : (await this.listFirst(q, offset + limit)).slice(offset);
  }

  /**
   * One page after `cursor` (a `nextCursor` an earlier page returned), newest first or oldest
   * first, by index position (score, then member as Redis orders them), so sessions updated,
   * added or removed between pages shift nothing: offsets did (a session updated during a listing
   * moved to the front and pushed a row back onto the next page, listed twice, or pulled one
   * forward past the page boundary, never listed) and cost O(offset) each. Each call reads at most
   * LIST_SCAN_LIMIT index rows: a filtered page may come back short with a `nextCursor`, to go on
   * from there. Oldest first is the complete order: every session that exists during the whole
   * listing is on some page (an update moves it forward, to a place still ahead of the cursor);
   * one updated after it was listed comes again at its new place. Not a snapshot.
   */
  async page(q: PageQuery): Promise<SessionPage> {
    const { sessions, next } = await this.pageAt(q, q.cursor === undefined ? undefined : decodeListCursor(q.cursor));
    return { sessions, ...(next ? { nextCursor: encodeListCursor(next) } : {}) };
  }

  private async pageAt(
    q: PageQuery,
    cursor: ListCursor | undefined,
  ): Promise<{ sessions: SessionEntry[]; next?: ListCursor }> {
    const limit = Math.max(1, Math.min(q.limit ?? 1000, 10_000));
    const order = q.order ?? "newest";
    const now = q.now ?? Date.now();
    const minScore = q.activeMinutes ? now - q.activeMinutes * 60_000 : Number.NEGATIVE_INFINITY;
    if (q.spawnedBy || (q.label && q.agentId)) return await this.pageInMemory(q, cursor, order, limit, minScore);

    const oneKind = !q.agentId && q.kinds?.length === 1 ? q.kinds[0] : undefined;
    const index = q.agentId
      ? this.keys.agentIndex(q.agentId)
      : oneKind
        ? this.keys.kindIndex(oneKind)
        : this.keys.updatedIndex();
    const filtered = Boolean(q.search || q.label || (q.kinds?.length && !oneKind) || q.agentAllowed);
    const sessions: SessionEntry[] = [];
    let at = cursor;
    let scanned = 0;
    while (scanned < LIST_SCAN_LIMIT) {
      // Unfiltered: the rows still wanted (two more, for the reserved keys left out); else a chunk.
      const count = filtered ? PAGE : limit - sessions.length + (q.includeReserved ? 0 : RESERVED_KEYS);
      const { rows, end } = await this.rowsAfter(index, order, at, minScore, count);
      const entries = await this.getMany(rows.map((r) => r.key));
      for (let i = 0; i < rows.length; i++) {
        at = rows[i]!;
        scanned++;
        const e = entries[i];
        if (e && this.matches(e, q, Number.NEGATIVE_INFINITY)) sessions.push(e);
        if (sessions.length < limit) continue;
        return { sessions, ...(end && i === rows.length - 1 ? {} : { next: at }) };
      }
      if (end) return { sessions };
    }
    return { sessions, ...(at ? { next: at } : {}) };
  }

  /**
   * Rows of `index` strictly after `after` in `order`, at least `count` read from Redis (fewer
   * returned when some sat at the cursor's own score on its side); `end` when Redis had no more.
   * Members of equal score are skipped past by reading on (ties are few: one millisecond each).
   */
  private async rowsAfter(
    index: string,
    order: "newest" | "oldest",
    after: ListCursor | undefined,
    minScore: number,
    count: number,
  ): Promise<{ rows: ListCursor[]; end: boolean }> {
    const min = Number.isFinite(minScore) ? String(minScore) : "-inf";
    const at = after ? scoreNumber(after.score) : undefined;
    let from: string;
    let to: string;
    if (order === "oldest") {
      // Below the activity window the cursor's own score holds no row to skip.
      const inWindow = at !== undefined && at >= minScore;
      from = inWindow ? after!.score : min;
      to = "+inf";
      if (!inWindow) after = undefined;
    } else {
      from = after ? after.score : "+inf";
      to = min;
      if (at !== undefined && at < minScore) return { rows: [], end: true };
    }
    for (let skip = 0; ; ) {
      const flat =
        order === "oldest"
          ? await this.redis.zrangebyscore(index, from, to, "WITHSCORES", "LIMIT", skip, count)
          : await this.redis.zrevrangebyscore(index, from, to, "WITHSCORES", "LIMIT", skip, count);
      const rows: ListCursor[] = [];
      for (let i = 0; i < flat.length; i += 2) rows.push({ key: flat[i]!, score: flat[i + 1]! });
      const end = rows.length < count;
      if (!after) return { rows, end };
      // The rows at the cursor's score come first; those not past its member were on earlier pages.
      let i = 0;
      while (i < rows.length && scoreNumber(rows[i]!.score) === at) {
        const cmp = byteOrder(rows[i]!.key, after.key);
        if (order === "oldest" ? cmp > 0 : cmp < 0) break;
        i++;
      }
      if (i < rows.length || end) return { rows: rows.slice(i), end };
      skip += rows.length;
    }
  }

  /** `page` for the listings that are not one index's range (children, a label): read, then ordered. */
  private async pageInMemory(
    q: ListQuery,
    cursor: ListCursor | undefined,
    order: "newest" | "oldest",
    limit: number,
    minScore: number,
  ): Promise<{ sessions: SessionEntry[]; next?: ListCursor }> {
    const all = await this.listFirst({ ...q, limit: LIST_SCAN_LIMIT }, LIST_SCAN_LIMIT);
    const pos = (e: SessionEntry): ListCursor => ({ score: String(e.updatedAt), key: e.key });
    const cmp = (a: ListCursor, b: ListCursor) =>
      scoreNumber(a.score) - scoreNumber(b.score) || byteOrder(a.key, b.key);
    const sign = order === "oldest" ? 1 : -1;
    const rows = all
      .filter((e) => e.updatedAt >= minScore && (!cursor || sign * cmp(pos(e), cursor) > 0))
      .sort((a, b) => sign * cmp(pos(a), pos(b)));
    const sessions = rows.slice(0, limit);
    return { sessions, ...(rows.length > limit ? { next: pos(sessions.at(-1)!) } : {}) };
  }

  private async listFirst(q: ListQuery, limit: number): Promise<SessionEntry[]> {
    const now = q.now ?? Date.now();
    const minScore = q.activeMinutes ? now - q.activeMinutes * 60_000 : -Infinity;

    if (q.label && q.agentId) {
      const key = await this.keyForLabel(q.agentId, q.label);
      const entry = key ? await this.get(key) : null;
      return entry && this.matches(entry, q, minScore) ? [entry] : [];
    }
    if (q.spawnedBy) {
      const keys =
        (q.spawnedByDepth ?? 1) > 1
          ? await this.descendantKeys(q.spawnedBy, q.spawnedByDepth)
          : await this.childKeys(q.spawnedBy);
      const entries = (await this.getMany(keys)).filter((e): e is SessionEntry => !!e && this.matches(e, q, minScore));
      return entries.sort((a, b) => b.updatedAt - a.updatedAt).slice(0, limit);
    }

    // Pick the narrowest index; several kinds are merged by score.
    const sources =
      q.kinds && q.kinds.length > 0 && !q.agentId
        ? q.kinds.map((k) => this.keys.kindIndex(k))
        : [q.agentId ? this.keys.agentIndex(q.agentId) : this.keys.updatedIndex()];

    const merged: { key: string; score: number }[] = [];
    for (const src of sources) merged.push(...(await this.scanIndex(src, q, minScore, limit)));
    merged.sort((a, b) => b.score - a.score);
    const keys = [...new Set(merged.map((m) => m.key))].slice(0, limit * 2 + RESERVED_KEYS);
    const entries = (await this.getMany(keys)).filter((e): e is SessionEntry => !!e && this.matches(e, q, minScore));
    return entries.sort((a, b) => b.updatedAt - a.updatedAt).slice(0, limit);
  }

  private async scanIndex(
    index: string,
    q: ListQuery,
    minScore: number,
    limit: number,
  ): Promise<{ key: string; score: number }[]> {
    const filtered = Boolean(q.search || q.label || (q.kinds && q.agentId) || q.agentAllowed);
    const out: { key: string; score: number }[] = [];
    let offset = 0;
    const min = Number.isFinite(minScore) ? String(minScore) : "-inf";
    while (out.length < limit && offset < LIST_SCAN_LIMIT) {
      // Leaving out the two reserved keys (global, unknown) is not a filter that needs paging: an
      // unfiltered read takes two more rows, and listFirst drops them (a listing of every session
      // stopped at LIST_SCAN_LIMIT when it counted as one).
      const count = filtered ? PAGE : limit + (q.includeReserved ? 0 : RESERVED_KEYS);
      const page = await this.redis.zrevrangebyscore(index, "+inf", min, "WITHSCORES", "LIMIT", offset, count);
      if (page.length === 0) break;
      const batch: { key: string; score: number }[] = [];
      for (let i = 0; i < page.length; i += 2) batch.push({ key: page[i]!, score: Number(page[i + 1]) });
      offset += batch.length;
      if (!filtered) return batch;
      const entries = await this.getMany(batch.map((b) => b.key));
      entries.forEach((e, i) => {
        if (e && this.matches(e, q, minScore)) out.push(batch[i]!);
      });
      if (batch.length < count) break;
    }
    return out;
  }

  private matches(e: SessionEntry, q: ListQuery, minScore: number): boolean {
    if (!q.includeReserved && (e.key === "global" || e.key === "unknown")) return false;
    if (e.updatedAt < minScore) return false;
    if (q.agentId && e.agentId !== q.agentId) return false;
    if (q.agentAllowed && !q.agentAllowed(e.agentId)) return false;
    if (q.kinds && q.kinds.length > 0 && !q.kinds.includes(e.kind)) return false;
    if (q.label && e.label !== q.label) return false;
    if (q.search) {
      const needle = q.search.toLowerCase();
      const hay = [e.key, e.label, e.displayName, e.subject, e.sessionId].filter(Boolean).join("\n").toLowerCase();
      if (!hay.includes(needle)) return false;
    }
    return true;
  }
}
