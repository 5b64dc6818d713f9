/**
 * The per-session inbox: the source of truth for what a session still has to run, in arrival
 * order. Producers push (with the run record, in one MULTI); only the lease holder takes.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../storage/redis-client.js";
import { fromScriptError } from "../errors/index.js";
import { QueueFullError } from "../errors/queue-full.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { LeaseHandle, SessionLeases } from "./session-lease.js";
import { serializeTurn, type Turn } from "./turn.js";
import { pendingWakeMember, pendingWakeSuffix } from "./pending-wakes.js";
import {
  PUSH_RESULTS,
  RUN_RECORD_TTL_SECONDS,
  queuedRecordFields,
  recordFromPairs,
  type RawBegun,
  type RunRecord,
  type RunRecords,
} from "./run-records.js";
import type { SessionEntry } from "../session/session-entry.js";
import type { DeadLetter } from "./dead-letters.js";
import { luaSafeJson } from "../text/well-formed.js";

const LUA_DIR = new URL("./lua/", import.meta.url);
/** turn-push.lua's first reply element for a push refused by a full inbox: `{ -2, inbox length }`. */
const PUSH_FULL = -2;

/** A turn the lease holder is about to run, with what it needs from Redis. */
export interface BegunTurn {
  turn: Turn;
  /** Its run record as it stood after the begin (null if the record expired). */
  record: RunRecord | null;
  /** The session's entry (null if the session was deleted meanwhile). */
  entry: SessionEntry | null;
  /** That entry's JSON exactly as stored (what a finish can check it against). */
  entryJson?: string | null;
}

export class Inbox {
  private readonly beginLua;
  private readonly leaseBeginLua;
  private readonly pushLua;
  private readonly discardLua;
  private readonly stopLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly records: RunRecords,
  ) {
    this.beginLua = luaCommand(redis, LUA_DIR, "turn-begin");
    this.leaseBeginLua = luaCommand(redis, LUA_DIR, "lease-begin");
    this.pushLua = luaCommand(redis, LUA_DIR, "turn-push");
    this.discardLua = luaCommand(redis, LUA_DIR, "turn-discard");
    this.stopLua = luaCommand(redis, LUA_DIR, "stop-queued");
  }

  /**
   * Queue a turn and create its run record (status queued) atomically, once per runId.
   * Says what the caller must do next: `ready` (queued into an idle session and put on the ready
   * list in the same step: nothing more to do), `wake` (queued into an idle session: add its
   * drain job), `queued` (behind other turns: a drain job exists already), or `exists` (the runId
   * existed; nothing queued). Only a push with `opts.ready` (readyWake) readies.
   *
   * With `expectEntry` (the session entry JSON the turn was built from, e.g. a cached copy) the
   * push happens only if the stored entry is still exactly that; otherwise nothing is queued and
   * `{ changed }` carries the current entry JSON (null: the session is gone).
   *
   * With `checkSessionId` (and no `expectEntry`) the push happens only if the session still has
   * the turn's sessionId (or no entry at all); otherwise `{ changed }` as above. A reset between
   * the caller's read and the push would otherwise leave the turn in a retired transcript.
   *
   * With `maxQueued` (> 0; a door's push, gateway.limits.maxQueuedTurns) an inbox that already
   * holds that many turns refuses the turn: nothing is queued and `QueueFullError` is thrown.
   * Checked in the same script, after the runId (a turn already queued answers `exists`).
   * Internal pushes leave it unset: they are never refused.
   */
  async push(
    turn: Turn,
    opts: { expectEntry?: string; checkSessionId?: boolean; ready?: boolean; maxQueued?: number } = {},
  ): Promise<"ready" | "wake" | "queued" | "exists" | { changed: string | null }> {
    const maxQueued = opts.maxQueued ?? 0;
    const res = await this.pushLua(
      [
        this.keys.run(turn.runId),
        this.keys.inbox(turn.sessionKey),
        this.keys.inflight(turn.sessionKey),
        this.keys.pendingWakes(),
        this.keys.session(turn.sessionKey),
        this.keys.readyList(),
      ],
      [
        serializeTurn(turn),
        RUN_RECORD_TTL_SECONDS,
        pendingWakeMember(turn),
        opts.expectEntry ?? "",
        opts.ready ? "1" : "0",
        opts.checkSessionId ? turn.sessionId : "",
        maxQueued,
        ...queuedRecordFields(turn),
      ],
    );
    if (Array.isArray(res) && res[0] === PUSH_FULL)
      throw new QueueFullError({ sessionKey: turn.sessionKey, limit: maxQueued, queued: Number(res[1]) });
    if (Array.isArray(res)) return { changed: (res[1] as string | null) ?? null };
    return PUSH_RESULTS[String(res)] as "ready" | "wake" | "queued" | "exists";
  }

  /**
   * The start of a drain (lease-begin.lua): take the session's lease and begin its next turn in
   * one round trip. `begun` is null when there was nothing to run (the lease is already given
   * back then); a held lease says when to ask again.
   */
  async acquireAndBegin(
    leases: SessionLeases,
    sessionKey: string,
    opts: { keepWake?: string } = {},
  ): Promise<
    | { acquired: false; retryInMs: number }
    | { acquired: true; lease: LeaseHandle; begun: BegunTurn | { corrupt: string } | null }
  > {
    const askedAt = Date.now();
    const [token, res] = (await this.leaseBeginLua(
      [
        this.keys.lease(sessionKey),
        this.keys.fence(sessionKey),
        this.keys.inbox(sessionKey),
        this.keys.inflight(sessionKey),
        this.keys.session(sessionKey),
        this.keys.pendingWakes(),
        this.keys.leaseTake(sessionKey),
      ],
      // A ready-list drain keeps its wake until it ends (begin-next.lua): "" leaves it, and
      // the script that gives the lease back clears it. The nonce answers a take sent twice once.
      [
        leases.ttl,
        this.keys.run(""),
        askedAt,
        opts.keepWake ? "" : pendingWakeSuffix(sessionKey),
        opts.keepWake ?? "",
        randomUUID(),
      ],
    )) as [number, RawBegun | number | false | null];
    if (!token) return { acquired: false, retryInMs: leases.retryIn(res as number) };
    const lease = leases.holding(sessionKey, token, askedAt, opts.keepWake);
    try {
      return { acquired: true, lease, begun: await this.fromRaw((res || null) as RawBegun | null, lease, true) };
    } catch (err) {
      await lease.release().catch(() => false);
      throw err;
    }
  }

  /**
   * Begin the lease holder's next turn (turn-begin.lua): an unfinished in-flight turn first,
   * else the oldest queued; its run marked running; returned with its run record and session
   * entry, all in one round trip. An entry that is not a readable turn comes back as
   * `{ corrupt }` (see discard).
   */
  async begin(
    lease: LeaseHandle,
    opts: { releaseWhenEmpty?: boolean } = {},
  ): Promise<BegunTurn | { corrupt: string } | null> {
    let res: RawBegun | null;
    try {
      res = (await this.beginLua(
        [
          lease.fenceKey,
          this.keys.inbox(lease.sessionKey),
          this.keys.inflight(lease.sessionKey),
          this.keys.session(lease.sessionKey),
          this.keys.pendingWakes(),
        ],
        [
          lease.token,
          this.keys.run(""),
          Date.now(),
          opts.releaseWhenEmpty ? "1" : "0",
          pendingWakeSuffix(lease.sessionKey),
          lease.wake ?? "",
        ],
      )) as RawBegun | null;
    } catch (err) {
      throw fromScriptError(err, lease);
    }
    return await this.fromRaw(res, lease, opts.releaseWhenEmpty ?? false);
  }

  /** A turn begun by a script (turn-begin, or a finish that began the next one), decoded. */
  async fromRaw(
    res: RawBegun | null,
    lease: LeaseHandle,
    releasedWhenEmpty: boolean,
  ): Promise<BegunTurn | { corrupt: string } | null> {
    if (res === null) {
      if (releasedWhenEmpty) lease.released();
      return null;
    }
    const [raw, pairs, entryRaw] = res;
    const turn = parseTurn(raw);
    if (!turn) return { corrupt: raw };
    // A turn stored without its runId first (an older writer): its record is read here.
    const record = pairs.length ? recordFromPairs(pairs) : await this.records.get(turn.runId);
    return {
      turn,
      record,
      entry: entryRaw ? (JSON.parse(entryRaw) as SessionEntry) : null,
      entryJson: entryRaw || null,
    };
  }

  /** Move an unreadable in-flight entry to the dead letters (fenced, atomic). */
  async discard(lease: LeaseHandle, raw: string, letter: DeadLetter): Promise<boolean> {
    try {
      const res = await this.discardLua(
        [lease.fenceKey, this.keys.inflight(lease.sessionKey), this.keys.deadLetters()],
        [lease.token, raw, letter.runId, luaSafeJson(letter)],
      );
      return res === 1;
    } catch (err) {
      throw fromScriptError(err, lease);
    }
  }

  async depth(sessionKey: string): Promise<number> {
    return await this.redis.llen(this.keys.inbox(sessionKey));
  }

  /** The turn the session's lease holder is running (or about to run), if any. */
  async inflightTurn(sessionKey: string): Promise<Turn | null> {
    const raw = await this.redis.lindex(this.keys.inflight(sessionKey), 0);
    return raw ? parseTurn(raw) : null;
  }

  /** Whether a turn of transcript `sessionId` is still queued or in flight in the session. */
  async hasTurnIn(sessionKey: string, sessionId: string): Promise<boolean> {
    const [inflight, queued] = await Promise.all([
      this.redis.lrange(this.keys.inflight(sessionKey), 0, -1),
      this.redis.lrange(this.keys.inbox(sessionKey), 0, -1),
    ]);
    return [...inflight, ...queued].some((raw) => parseTurn(raw)?.sessionId === sessionId);
  }

  async hasInflight(sessionKey: string): Promise<boolean> {
    return (await this.redis.llen(this.keys.inflight(sessionKey))) > 0;
  }

  /**
   * Remove every queued (not in-flight) turn atomically, returning them (`/stop`): their records
   * become `killed` with `error` and their waiters are told, in the same step
   * (stop-queued.lua), and each is kept in the stopped-turns hash until `stoppedDone`.
   */
  async drop(sessionKey: string, error: string): Promise<Turn[]> {
    const items = (await this.stopLua(
      [this.keys.inbox(sessionKey), this.keys.stoppedTurns()],
      [this.keys.run(""), this.keys.runDoneChannel(), error, Date.now()],
    )) as string[];
    return items.map(parseTurn).filter((t): t is Turn => t !== null);
  }

  /**
   * Remove the queued turn of run `runId` only (a steer stopping the run it replaces), leaving
   * every other queued turn in place, with the same bookkeeping as `drop` (stop-queued.lua).
   */
  async dropRun(sessionKey: string, runId: string, error: string): Promise<Turn[]> {
    const items = (await this.stopLua(
      [this.keys.inbox(sessionKey), this.keys.stoppedTurns()],
      [this.keys.run(""), this.keys.runDoneChannel(), error, Date.now(), runId],
    )) as string[];
    return items.map(parseTurn).filter((t): t is Turn => t !== null);
  }

  /** Dropped turns still kept (see drop) since before `olderThan` (ms), at most `limit`. */
  async stoppedBefore(olderThan: number, limit: number): Promise<Turn[]> {
    const all = await this.redis.hgetall(this.keys.stoppedTurns());
    const out: Turn[] = [];
    for (const [runId, value] of Object.entries(all)) {
      const nl = value.indexOf("\n");
      if (Number(value.slice(0, nl)) >= olderThan) continue;
      const turn = parseTurn(value.slice(nl + 1));
      if (turn) out.push(turn);
      else await this.redis.hdel(this.keys.stoppedTurns(), runId);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** What the dropped turn `runId` carried is queued: forget it. */
  async stoppedDone(runId: string): Promise<void> {
    await this.redis.hdel(this.keys.stoppedTurns(), runId);
  }
}

/** A stored turn, or null when the entry is not one (corrupted by hand or by a bug). */
function parseTurn(raw: string): Turn | null {
  try {
    const t = JSON.parse(raw) as Turn;
    return t && typeof t === "object" && typeof t.runId === "string" && typeof t.sessionKey === "string" ? t : null;
  } catch {
    return null;
  }
}
