/**
 * The sub-agent run registry in Redis: one hash per spawned run (task, label, lineage, outcome,
 * frozen result, announce state), the requester's runs newest first, its active runs (the
 * `maxChildrenPerAgent` count) and each child's current run (steer swaps it). Every process
 * reads the same registry, so `subagents list/kill/steer` work from any gateway or worker.
 */
import type { RedisClient } from "../storage/redis-client.js";
import { luaCommand } from "../storage/lua-script.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { isSubagentKey } from "../session/key-classify.js";

const LUA_DIR = new URL("./lua/", import.meta.url);
/** Registry entries live as long as run records: their TTL by default (`maintenance.runRecordTtlMs`). */
export const REGISTRY_TTL_SECONDS = 7 * 24 * 3600;

/**
 * `deferred`: the run ended with what it spawned still to be reported to it; the announce of
 * the last completion turn in its session reports it (subagent-claim.lua).
 */
export type AnnounceState = "pending" | "deferred" | "delivered" | "skipped" | "suppressed" | "failed";

export interface SubagentRun {
  runId: string;
  childSessionKey: string;
  requesterSessionKey: string;
  task: string;
  label?: string;
  cleanup: "delete" | "keep";
  depth: number;
  model?: string;
  runTimeoutSeconds?: number;
  createdAt: number;
  /** Outcome, from the child's run record (never from model text). */
  status: "running" | "ok" | "error" | "timeout" | "killed";
  endedAt?: number;
  error?: string;
  /** The child's result text as it was when the run ended. */
  frozenResult?: string;
  usageInput?: number;
  usageOutput?: number;
  startedAt?: number;
  announce: AnnounceState;
  announceError?: string;
  /** Why this run's completion is not announced (a steer restarted it, a kill stopped it). */
  suppressAnnounce?: "steer-restart" | "killed";
  /** Set when a steer replaced this run by another in the same child session. */
  replacedBy?: string;
  /** On a run a steer started: the run it replaced. */
  replaces?: string;
  /**
   * The agent-to-agent hop of the child's turn (its requester's + 1): the completion turn in the
   * requester comes one hop later, so chains of sends through spawns stay under `maxHops`.
   */
  hop?: number;
}

/** What a steer's replace found (subagent-replace.lua): only `replaced` changed anything. */
export type ReplaceResult = "replaced" | "finished" | "stopped" | "unknown";
/** What a kill's suppression found (subagent-suppress.lua): only `suppressed` changed anything. */
export type SuppressResult = "suppressed" | "finished" | "replaced" | "unknown";

export class SubagentRegistry {
  private readonly registerLua;
  private readonly replaceLua;
  private readonly suppressLua;
  private readonly claimLua;
  private readonly endLua;
  private readonly unqueuedLua;
  private readonly suppressedLua;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** What the registry writes lives this long: the run records' TTL (`svc.runs.ttlSeconds`). */
    private readonly ttlSeconds = REGISTRY_TTL_SECONDS,
  ) {
    this.registerLua = luaCommand(redis, LUA_DIR, "subagent-register");
    this.replaceLua = luaCommand(redis, LUA_DIR, "subagent-replace");
    this.suppressLua = luaCommand(redis, LUA_DIR, "subagent-suppress");
    this.claimLua = luaCommand(redis, LUA_DIR, "subagent-claim");
    this.endLua = luaCommand(redis, LUA_DIR, "subagent-end");
    this.unqueuedLua = luaCommand(redis, LUA_DIR, "subagent-unqueued");
    this.suppressedLua = luaCommand(redis, LUA_DIR, "subagent-suppressed");
  }

  recordKey(runId: string): string {
    return `${this.keys.base}:sa:run:${runId}`;
  }
  private requesterKey(requester: string): string {
    return `${this.keys.base}:sa:req:${requester}`;
  }
  private activeKey(requester: string): string {
    return `${this.keys.base}:sa:active:${requester}`;
  }
  private childKey(child: string): string {
    return `${this.keys.base}:sa:child:${child}`;
  }
  /** The completions still owed to an orchestrator session by the runs it spawned that ended (subagent-end.lua). */
  private pendingKey(requester: string): string {
    return `${this.keys.base}:sa:pending:${requester}`;
  }

  /** Registers once per runId within `maxActive`; see subagent-register.lua. */
  /**
   * Register `run` within `maxActive` of its requester's active runs, once per runId. Refused
   * (`stopped`) when `callerRunId`, the run that spawns it, was stopped or has ended
   * (subagent-register.lua).
   */
  async register(
    run: SubagentRun,
    maxActive: number,
    callerRunId?: string,
  ): Promise<{ result: "registered" | "existing" | "limit" | "stopped"; active: number }> {
    const [code, active] = (await this.registerLua(
      [
        this.recordKey(run.runId),
        this.requesterKey(run.requesterSessionKey),
        this.activeKey(run.requesterSessionKey),
        this.childKey(run.childSessionKey),
        // No calling run (a call from outside a turn): a key under the same tag that never exists.
        this.keys.run(callerRunId ?? ""),
        this.keys.subagentRegistered(),
      ],
      [run.runId, run.createdAt, maxActive, this.ttlSeconds, ...encode(run)],
    )) as [number, number];
    const result = code === 1 ? "registered" : code === 0 ? "existing" : code === -1 ? "limit" : "stopped";
    return { result, active };
  }

  async get(runId: string): Promise<SubagentRun | null> {
    const h = await this.redis.hgetall(this.recordKey(runId));
    return Object.keys(h).length ? decode(h) : null;
  }

  async update(runId: string, fields: Partial<Record<keyof SubagentRun, string | number>>): Promise<void> {
    const key = this.recordKey(runId);
    if (!(await this.redis.exists(key))) return;
    await this.redis.hset(key, Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, String(v)])));
  }

  /** Only if not set yet (the frozen result and the end are written once). */
  async setOnce(runId: string, field: keyof SubagentRun, value: string | number): Promise<void> {
    await this.redis.hsetnx(this.recordKey(runId), field, String(value));
  }

  async activeCount(requester: string): Promise<number> {
    return await this.redis.scard(this.activeKey(requester));
  }

  /** The requester's runs that hold a child slot (records gone with their TTL left out). */
  async activeRuns(requester: string): Promise<SubagentRun[]> {
    const ids = await this.redis.smembers(this.activeKey(requester));
    return (await Promise.all(ids.map((id) => this.get(id)))).filter((r): r is SubagentRun => r !== null);
  }

  /**
   * Undo the registration of a run whose turn was never queued (no run record), registered
   * before `registeredBefore` (subagent-unqueued.lua): `dropped-session` when the child session
   * held only this run (its spawn created it for it: the caller deletes it), `kept` when refused.
   * A steer's run gives the run it replaced back its place; `dropped-reannounce` when that run's
   * announce was already suppressed and must be done again (releaseRequester does it).
   */
  async dropUnqueued(
    run: SubagentRun,
    registeredBefore: number,
  ): Promise<"kept" | "dropped" | "dropped-session" | "dropped-reannounce"> {
    const code = Number(
      await this.unqueuedLua(this.unqueuedKeys(run), this.unqueuedArgs(run, "drop", registeredBefore)),
    );
    if (code === 3) return "dropped-reannounce";
    return code === 2 ? "dropped-session" : code === 1 ? "dropped" : "kept";
  }

  /**
   * The run of `childKey` a drop of `dropped` gave back its place with its announce to be done
   * again (subagent-unqueued.lua `reannounce`), if it is still the child's current run.
   */
  async reannounceOf(childKey: string, dropped: string): Promise<string | undefined> {
    const current = await this.currentRunOf(childKey);
    if (!current) return undefined;
    return (await this.redis.hget(this.recordKey(current), "reannounce")) === dropped ? current : undefined;
  }

  /**
   * An announce job of a suppressed run marks it `suppressed`, only while it still is
   * (subagent-suppressed.lua): false when a drop gave it back its announce meanwhile.
   */
  async markSuppressed(runId: string): Promise<boolean> {
    return Number(await this.suppressedLua([this.recordKey(runId)], ["suppressed"])) === 1;
  }

  /**
   * A kill of a run whose turn was never queued (no run record): nothing runs to stop, and no
   * announce job will end it, so it ends here, as `killed` with its announce suppressed
   * (subagent-unqueued.lua). Only a run the kill suppressed; false when refused.
   */
  async endUnqueued(run: SubagentRun, endedAt: number): Promise<boolean> {
    return Number(await this.unqueuedLua(this.unqueuedKeys(run), this.unqueuedArgs(run, "end", endedAt))) === 1;
  }

  /**
   * A stop, reset or delete of the run's own child session while its turn was never queued (no
   * run record): the run is suppressed as by a kill and ended as `killed` in one step
   * (subagent-unqueued.lua). Refused (false) for a run that is not running, was replaced by a
   * steer, or has its turn queued.
   */
  async stopUnqueued(run: SubagentRun, endedAt: number): Promise<boolean> {
    return Number(await this.unqueuedLua(this.unqueuedKeys(run), this.unqueuedArgs(run, "stop", endedAt))) === 1;
  }

  private unqueuedKeys(run: SubagentRun): string[] {
    return [
      this.recordKey(run.runId),
      this.keys.run(run.runId),
      this.requesterKey(run.requesterSessionKey),
      this.activeKey(run.requesterSessionKey),
      this.childKey(run.childSessionKey),
      this.keys.subagentReleaseOwed(),
      // The run a steer's run replaced (given back its place by a drop); else a key never written.
      this.recordKey(run.replaces ?? ""),
    ];
  }

  /**
   * ARGV of subagent-unqueued.lua: the run's owed-release member, and whether a release is owed
   * to its requester by whatever the step does ("" when its requester is not a sub-agent).
   */
  private unqueuedArgs(run: SubagentRun, op: "drop" | "end" | "stop", at: number): (string | number)[] {
    return [run.runId, op, at, owedReleaseMember(run), isSubagentKey(run.requesterSessionKey) ? "1" : ""];
  }

  /**
   * The owed releases recorded (by subagent-unqueued.lua) at or before `before` (ms on Redis's
   * clock), oldest first, at most `limit`: each as the run it is for (its runId and sessions) or,
   * for a member this code did not write, `undefined` with the member.
   */
  async owedReleases(before: number, limit: number): Promise<{ member: string; run?: OwedRelease }[]> {
    const members = await this.redis.zrangebyscore(this.keys.subagentReleaseOwed(), "-inf", before, "LIMIT", 0, limit);
    return members.map((member) => {
      const run = parseOwedRelease(member);
      return run ? { member, run } : { member };
    });
  }

  /** Up to `limit` runIds registered before `before` (oldest first), for the cut-off sweep. */
  async registeredBefore(before: number, limit: number): Promise<string[]> {
    return await this.redis.zrangebyscore(this.keys.subagentRegistered(), "-inf", before, "LIMIT", 0, limit);
  }

  /** Registered runs the cut-off sweep has settled (queued, ended, dropped or gone). */
  async forgetRegistered(runIds: string[]): Promise<void> {
    if (runIds.length) await this.redis.zrem(this.keys.subagentRegistered(), ...runIds);
  }

  /** A registered run whose drop failed, dated `at` again, behind the others. */
  async registeredAgain(runId: string, at: number): Promise<void> {
    await this.redis.zadd(this.keys.subagentRegistered(), "XX", at, runId);
  }

  /** The release owed for `run` is done (or there was none to do): forget it. */
  async releaseDone(run: OwedRelease): Promise<void> {
    await this.forgetOwed(owedReleaseMember(run));
  }

  /** An owed release whose release failed, dated `at` again (only while it is still owed). */
  async owedAgain(member: string, at: number): Promise<void> {
    await this.redis.zadd(this.keys.subagentReleaseOwed(), "XX", at, member);
  }

  /** Remove an owed-release member as stored (one this code cannot read is dropped so). */
  async forgetOwed(member: string): Promise<void> {
    await this.redis.zrem(this.keys.subagentReleaseOwed(), member);
  }

  /**
   * The run has ended: it no longer counts against the requester's active children. With
   * `completion` (a requester that is an orchestrator: the runId of the completion turn it is
   * owed), that completion is marked pending in the same step, until its claim settles it
   * (subagent-end.lua, subagent-claim.lua).
   */
  async markEnded(
    run: SubagentRun,
    status: SubagentRun["status"],
    endedAt: number,
    error?: string,
    completion?: string,
  ): Promise<void> {
    await this.endLua(
      [this.recordKey(run.runId), this.activeKey(run.requesterSessionKey), this.pendingKey(run.requesterSessionKey)],
      [run.runId, status, endedAt, error ?? "", completion ?? "", this.ttlSeconds],
    );
  }

  /**
   * The completion `completion` owed to the session `requester` is settled without a claim: no
   * completion turn will come (its run silent, killed, its announce given up; then `runId`, that
   * run, is no longer active there either), or the turn's claim has no report to claim (the run
   * it was for was killed or steered, or is gone).
   */
  async settleCompletion(requester: string, completion: string, runId?: string): Promise<void> {
    const step = this.redis.multi().srem(this.pendingKey(requester), completion);
    if (runId) step.srem(this.activeKey(requester), runId);
    await step.exec();
  }

  /**
   * Claim the run's announce as `claimer` (its own runId, or a completion turn in its session,
   * which settles `settles`, the completion it was), ordered by `order` (outcomeOrder in
   * src/subagents/announce.ts): `claimed` with the outcome to announce (the newest of every
   * claimer's, all of them in `turns`), `deferred` while what it spawned is still to be reported
   * to it, `taken` by another claimer, or `suppressed` (with the reason) by a kill or steer that
   * came before any claim won (subagent-claim.lua).
   */
  async claimAnnounce(
    run: SubagentRun,
    claimer: string,
    order: string,
    settles = "",
  ): Promise<
    | { result: "claimed"; outcome: string; turns: string[] }
    | { result: "suppressed"; reason: NonNullable<SubagentRun["suppressAnnounce"]> }
    | { result: "deferred" | "taken" }
  > {
    const [code, outcome, ...turns] = (await this.claimLua(
      [
        this.recordKey(run.runId),
        this.activeKey(run.childSessionKey),
        this.keys.inbox(run.childSessionKey),
        this.keys.inflight(run.childSessionKey),
        this.pendingKey(run.childSessionKey),
      ],
      [claimer, order, settles],
    )) as [number, string?, ...string[]];
    if (code === 1) return { result: "claimed", outcome: outcome ?? claimer, turns };
    if (code === -2) return { result: "suppressed", reason: outcome === "steer-restart" ? "steer-restart" : "killed" };
    return { result: code === 0 ? "deferred" : "taken" };
  }

  /**
   * The requester's runs, newest first: the `limit` newest (runs replaced by a steer are left out
   * and do not count against it), and every run still counted active whatever its age. An active run holds one of
   * the requester's child slots; a window of the newest alone would leave it out after many
   * quick runs, unlisted and unkillable while the spawn limit still counts it.
   */
  async forRequester(requester: string, limit = 200): Promise<SubagentRun[]> {
    const out: SubagentRun[] = [];
    const seen = new Set<string>();
    const take = (r: SubagentRun | null) => {
      if (r && !r.replacedBy && !seen.has(r.runId)) {
        seen.add(r.runId);
        out.push(r);
      }
    };
    for (let start = 0; out.length < limit; start += limit) {
      const ids = await this.redis.zrevrange(this.requesterKey(requester), start, start + limit - 1);
      for (const r of await Promise.all(ids.map((id) => this.get(id)))) if (out.length < limit) take(r);
      if (ids.length < limit) break;
    }
    const active = (await this.redis.smembers(this.activeKey(requester))).filter((id) => !seen.has(id));
    for (const r of await Promise.all(active.map((id) => this.get(id)))) take(r);
    // These reads are not one step: a steer between them (subagent-replace.lua) lets a run read
    // before it was replaced and the run that replaced it both in, one child listed twice (a kill
    // by label then answered "ambiguous"). The run a listed run replaces is not current.
    const replaced = new Set(out.map((r) => r.replaces).filter((id) => id !== undefined));
    return out.filter((r) => !replaced.has(r.runId)).sort((a, b) => b.createdAt - a.createdAt);
  }

  async currentRunOf(childKey: string): Promise<string | null> {
    return await this.redis.get(this.childKey(childKey));
  }

  /** Drop a finished run from its requester's list (archiveAfterMinutes). */
  async archive(run: SubagentRun): Promise<void> {
    await this.redis
      .multi()
      .zrem(this.requesterKey(run.requesterSessionKey), run.runId)
      .srem(this.activeKey(run.requesterSessionKey), run.runId)
      .exec();
  }

  /**
   * A kill: the run's announce is suppressed, in one step with the check that its run record is
   * not terminal (subagent-suppress.lua). A run that has already ended keeps its announce, even
   * before its announce job has marked the registry record ended.
   */
  async suppressKilled(runId: string): Promise<SuppressResult> {
    const code = Number(await this.suppressLua([this.recordKey(runId), this.keys.run(runId)], ["killed"]));
    return code === 1 ? "suppressed" : code === 0 ? "finished" : code === -1 ? "replaced" : "unknown";
  }

  /**
   * A steer: `next` replaces `prev` in the same child session, only while prev still runs
   * (subagent-replace.lua): the old run's announce is suppressed and it stops counting as
   * active; the new one takes its place and names prev in `replaces`. Refused (`finished`) when
   * prev's run record is terminal, and (`stopped`) when a kill suppressed prev or another steer
   * replaced it. A replace sent twice finds its own work and answers `replaced`.
   */
  async replace(prev: SubagentRun, next: SubagentRun): Promise<ReplaceResult> {
    const code = Number(
      await this.replaceLua(
        [
          this.recordKey(prev.runId),
          this.keys.run(prev.runId),
          this.activeKey(prev.requesterSessionKey),
          this.recordKey(next.runId),
          this.requesterKey(next.requesterSessionKey),
          this.childKey(next.childSessionKey),
          this.keys.subagentRegistered(),
        ],
        [prev.runId, next.runId, next.createdAt, this.ttlSeconds, ...encode(next)],
      ),
    );
    return code === 1 ? "replaced" : code === 0 ? "finished" : code === -1 ? "stopped" : "unknown";
  }
}

/** What releasing a run's requester needs of the run: enough to do it after its record is gone (a drop). */
export type OwedRelease = Pick<SubagentRun, "runId" | "requesterSessionKey" | "childSessionKey">;

/**
 * The member of `RedisKeys.subagentReleaseOwed`: the JSON array `[runId, requesterKey, childKey]`
 * (JSON, so whatever a session key holds, the member reads back as written).
 */
export function owedReleaseMember(run: OwedRelease): string {
  return JSON.stringify([run.runId, run.requesterSessionKey, run.childSessionKey]);
}

export function parseOwedRelease(member: string): OwedRelease | undefined {
  let parts: unknown;
  try {
    parts = JSON.parse(member);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parts) || parts.length !== 3 || !parts.every((p) => typeof p === "string" && p !== ""))
    return undefined;
  const [runId, requesterSessionKey, childSessionKey] = parts as [string, string, string];
  return { runId, requesterSessionKey, childSessionKey };
}

function encode(run: SubagentRun): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(run)) if (v !== undefined) out.push(k, String(v));
  return out;
}

function num(v: string | undefined): number | undefined {
  return v === undefined || v === "" ? undefined : Number(v);
}

export function decode(h: Record<string, string>): SubagentRun {
  const run: SubagentRun = {
    runId: h.runId ?? "",
    childSessionKey: h.childSessionKey ?? "",
    requesterSessionKey: h.requesterSessionKey ?? "",
    task: h.task ?? "",
    cleanup: h.cleanup === "delete" ? "delete" : "keep",
    depth: Number(h.depth ?? 1),
    createdAt: Number(h.createdAt ?? 0),
    status: (h.status ?? "running") as SubagentRun["status"],
    announce: (h.announce ?? "pending") as AnnounceState,
  };
  if (h.label) run.label = h.label;
  if (h.model) run.model = h.model;
  const opt = {
    runTimeoutSeconds: num(h.runTimeoutSeconds),
    endedAt: num(h.endedAt),
    usageInput: num(h.usageInput),
    usageOutput: num(h.usageOutput),
    startedAt: num(h.startedAt),
    hop: num(h.hop),
  };
  for (const [k, v] of Object.entries(opt)) if (v !== undefined) (run as unknown as Record<string, number>)[k] = v;
  if (h.error) run.error = h.error;
  if (h.frozenResult !== undefined) run.frozenResult = h.frozenResult;
  if (h.announceError) run.announceError = h.announceError;
  if (h.suppressAnnounce === "steer-restart" || h.suppressAnnounce === "killed")
    run.suppressAnnounce = h.suppressAnnounce;
  if (h.replacedBy) run.replacedBy = h.replacedBy;
  if (h.replaces) run.replaces = h.replaces;
  return run;
}
