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
/** ... and for one refused by the inbox's bytes: `{ -3, inbox length, inbox bytes }`. */
const PUSH_FULL_BYTES = -3;
/**
 * How much one step of a `/stop` takes (stop-queued.lua): at most this many turns, and past its
 * first turn at most this many bytes, so no script call holds Redis long whatever the inbox holds
 * (one call over a whole inbox of 64 MiB held it 0.8 s; a step of 1 MiB holds it under 10 ms,
 * test/integration/stop-in-steps.test.ts). A stop takes as many steps as it needs.
 */
export const STOP_STEP_TURNS = 100;
export const STOP_STEP_BYTES = 1024 * 1024;
/**
 * How long a `/stop`'s cut is remembered (`RedisKeys.stopCut`, stop-queued.lua), so that the same
 * first step sent again (ioredis resends a command left unanswered by a dropped connection, for
 * workers with no retry limit, however long Redis is away) cuts nothing. A day: far beyond any
 * reconnect and any stop, the sweep's minute for an abandoned one included; one small key a stop.
 */
export const STOP_CUT_TTL_MS = 24 * 3600 * 1000;

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
   * the turn's sessionId; otherwise `{ changed }` as above (null: deleted meanwhile). A reset or
   * a delete between the caller's read and the push would otherwise leave the turn in a retired
   * transcript, or in a new one nothing names.
   *
   * With `maxQueued` (> 0; a door's push, gateway.limits.maxQueuedTurns) an inbox that already
   * holds that many turns refuses the turn, and with `maxQueuedBytes` (> 0,
   * gateway.limits.maxQueuedBytes) a non-empty inbox whose turns' bytes this one would take past
   * it: nothing is queued and `QueueFullError` is thrown. Checked in the same script, after the
   * runId (a turn already queued answers `exists`). Internal pushes leave them unset: they are
   * never refused.
   */
  async push(
    turn: Turn,
    opts: {
      expectEntry?: string;
      checkSessionId?: boolean;
      ready?: boolean;
      maxQueued?: number;
      maxQueuedBytes?: number;
    } = {},
  ): Promise<"ready" | "wake" | "queued" | "exists" | { changed: string | null }> {
    const maxQueued = opts.maxQueued ?? 0;
    const maxQueuedBytes = opts.maxQueuedBytes ?? 0;
    const json = serializeTurn(turn);
    const res = await this.pushLua(
      [
        this.keys.run(turn.runId),
        this.keys.inbox(turn.sessionKey),
        this.keys.inflight(turn.sessionKey),
        this.keys.pendingWakes(),
        this.keys.session(turn.sessionKey),
        this.keys.readyList(),
        this.keys.inboxBytes(turn.sessionKey),
        this.keys.workSessions(),
      ],
      [
        json,
        // The records' TTL (maintenance.runRecordTtlMs), through the script's TTL argument.
        this.records.ttlSeconds,
        pendingWakeMember(turn),
        opts.expectEntry ?? "",
        opts.ready ? "1" : "0",
        opts.checkSessionId ? turn.sessionId : "",
        maxQueued,
        maxQueuedBytes,
        // One argument, not one per field: ioredis pays per argument (docs/design/runs.md).
        luaSafeJson(queuedRecordFields(turn)),
      ],
    );
    if (Array.isArray(res) && res[0] === PUSH_FULL)
      throw new QueueFullError({ sessionKey: turn.sessionKey, limit: maxQueued, queued: Number(res[1]) });
    if (Array.isArray(res) && res[0] === PUSH_FULL_BYTES)
      throw new QueueFullError({
        sessionKey: turn.sessionKey,
        limit: maxQueuedBytes,
        queued: Number(res[1]),
        bytes: { queued: Number(res[2]), turn: Buffer.byteLength(json) },
      });
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
    const askedAtMono = performance.now(); // the lease's own clock (session-lease.ts, heldUntil)
    const [token, res] = (await this.leaseBeginLua(
      [
        this.keys.lease(sessionKey),
        this.keys.fence(sessionKey),
        this.keys.inbox(sessionKey),
        this.keys.inflight(sessionKey),
        this.keys.session(sessionKey),
        this.keys.pendingWakes(),
        this.keys.leaseTake(sessionKey),
        this.keys.inboxBytes(sessionKey),
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
    const lease = leases.holding(sessionKey, token, askedAtMono, opts.keepWake);
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
          this.keys.inboxBytes(lease.sessionKey),
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
        [lease.fenceKey, this.keys.inflight(lease.sessionKey), this.keys.deadLetters(), this.keys.deadLetterIndex()],
        [lease.token, raw, letter.runId, luaSafeJson(letter), letter.failedAt],
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
   * Remove every queued (not in-flight) turn (`/stop`), in steps (stop-queued.lua): the first
   * takes the whole inbox aside in O(1), so exactly the turns queued at that instant are dropped
   * (none of them can begin meanwhile, and one pushed after it runs as usual); each step then
   * drops at most STOP_STEP_TURNS turns and STOP_STEP_BYTES bytes, so Redis never stalls on a
   * huge inbox. Yields each step's turns, oldest first (the first step's possibly none): their
   * records are `killed` with `error` and their waiters told, in the step, and each is kept in
   * the stopped-turns hash until `stoppedDone`. A stop abandoned between steps leaves the rest
   * for `resumeStop` (the maintenance sweep).
   */
  async *drop(sessionKey: string, error: string): AsyncGenerator<Turn[]> {
    yield* this.stopSteps(randomUUID(), error, this.keys.inbox(sessionKey), this.keys.inboxBytes(sessionKey));
  }

  /** The stops abandoned between steps (see drop) whose last step was before `before` (ms), at most `limit`. */
  async stopsBefore(before: number, limit: number): Promise<string[]> {
    return await this.redis.zrangebyscore(this.keys.stops(), "-inf", `(${before}`, "LIMIT", 0, limit);
  }

  /** Go on with the stop `stopId` (see drop, stopsBefore) where it was left, step by step. */
  async *resumeStop(stopId: string, error: string): AsyncGenerator<Turn[]> {
    yield* this.stopSteps(stopId, error);
  }

  private async *stopSteps(stopId: string, error: string, inbox?: string, inboxBytes?: string): AsyncGenerator<Turn[]> {
    const list = this.keys.stopList(stopId);
    for (let cut = inbox !== undefined; ; cut = false) {
      const [more, items] = (await this.stopLua(
        // Without a cut the inbox keys are not used: the stop's own list stands in for them.
        [
          inbox ?? list,
          this.keys.stoppedTurns(),
          list,
          this.keys.stops(),
          inboxBytes ?? list,
          this.keys.stopCut(stopId),
        ],
        [
          this.keys.run(""),
          this.keys.runDoneChannel(),
          error,
          Date.now(),
          "",
          cut ? "1" : "0",
          STOP_STEP_TURNS,
          STOP_STEP_BYTES,
          stopId,
          STOP_CUT_TTL_MS,
        ],
      )) as [number, string[]];
      yield items.map(parseTurn).filter((t): t is Turn => t !== null);
      if (more !== 1) return;
    }
  }

  /**
   * Remove the queued turn of run `runId` only (a steer stopping the run it replaces), leaving
   * every other queued turn in place, with the same bookkeeping as `drop` (stop-queued.lua). The
   * inbox is searched in steps of the same bounds, by index: turns begun meanwhile move the rest
   * forward, so the search may pass over the turn. Not found, it is stopped by its run instead
   * (`stopRun`: its cancel flag, which the turn reads when it begins).
   */
  async dropRun(sessionKey: string, runId: string, error: string): Promise<Turn[]> {
    const inbox = this.keys.inbox(sessionKey);
    // No stop's own list nor cut record for one run: the inbox stands in for them (not used).
    const keys = [inbox, this.keys.stoppedTurns(), inbox, this.keys.stops(), this.keys.inboxBytes(sessionKey), inbox];
    for (let from = 0; ; ) {
      const [next, items] = (await this.stopLua(keys, [
        this.keys.run(""),
        this.keys.runDoneChannel(),
        error,
        Date.now(),
        runId,
        "0",
        STOP_STEP_TURNS,
        STOP_STEP_BYTES,
        from,
      ])) as [number, string[]];
      if (next < 0) return items.map(parseTurn).filter((t): t is Turn => t !== null);
      from = next;
    }
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

  /** What the dropped turns `runIds` carried is queued: forget them. */
  async stoppedDone(...runIds: string[]): Promise<void> {
    if (runIds.length) await this.redis.hdel(this.keys.stoppedTurns(), ...runIds);
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
