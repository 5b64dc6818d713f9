/**
 * subagents: list, steer or kill the runs this session spawned (docs/concepts/subagents.md).
 * Kills cascade to descendants wherever they run (the cancel broadcast reaches every worker);
 * a steer aborts the child's current run and restarts it with the guidance, and the aborted
 * run's announce is suppressed so the requester hears only from the new one.
 *
 * A run has ended once its run record is terminal, even while the registry still says
 * `running` (it learns the outcome in the announce job, which may not have run yet): such a run
 * is finished for kill and steer, which leave its announce alone. The suppression itself checks
 * the run record in the same Lua step (subagent-suppress.lua, subagent-replace.lua), so a run
 * ending between the listing and the kill or steer keeps its result too.
 */
import type { ToolDeps } from "./tool-deps.js";
import { enqueueTurn } from "../runs/enqueue.js";
import { toolCallIds } from "./call-ids.js";
import { stopRun, stopSession } from "../runs/stop.js";
import { announceContinuation } from "../subagents/announce.js";
import { SubagentRegistry, type SubagentRun } from "../subagents/registry.js";
import { reportWaits, withOutcome } from "../subagents/run-state.js";
import { runningDescendants } from "../subagents/descendants.js";
import { endUnqueued, releaseUnqueued } from "../subagents/unqueued.js";
import * as rules from "../subagents/spawn-policy.js";
import { SubagentsArgs } from "./schemas.js";
import { argsError, forbidden, toolError, type ToolCaller, type ToolResult } from "./tool-context.js";

const STEER_MAX_CHARS = 4000;
const STEER_INTERVAL_MS = 2000;
const DEFAULT_RECENT_MINUTES = 30;

export const LEAF_CONTROL_ERROR = "Leaf subagents cannot control other sessions.";

interface Listed {
  active: SubagentRun[];
  recent: SubagentRun[];
}

/** A run is active while it runs or any of its descendants still does (it can still be killed). */
async function listRuns(
  svc: ToolDeps,
  registry: SubagentRegistry,
  requester: string,
  recentMinutes: number,
  now: number,
): Promise<Listed & { pending: Map<string, number> }> {
  const runs: SubagentRun[] = [];
  let registered = await registry.forRequester(requester);
  // Runs whose spawn was cut off before their turn was queued are released, not listed as running.
  const released = await releaseUnqueued(svc, registry, registered, now);
  // A steer's run released gave the run it replaced back its place: read again to list that one.
  if (released.size) registered = await registry.forRequester(requester);
  const kept = registered.filter((r) => !released.has(r.runId));
  runs.push(...(await Promise.all(kept.map((r) => withOutcome(svc, r)))));
  const pending = new Map<string, number>();
  for (const r of runs)
    if (r.status !== "running")
      pending.set(r.runId, (await runningDescendants(svc, registry, r.childSessionKey)).length);
  // Running, with descendants still running, or ended with its report still waiting for what it spawned.
  const isActive = (r: SubagentRun) => r.status === "running" || (pending.get(r.runId) ?? 0) > 0 || reportWaits(r);
  const active = runs.filter(isActive);
  const recent = runs.filter((r) => !isActive(r) && (r.endedAt ?? 0) >= now - recentMinutes * 60_000);
  return { active, recent, pending };
}

function item(r: SubagentRun, index: number, now: number, pendingDescendants: number) {
  const end = r.endedAt ?? now;
  return {
    index,
    runId: r.runId,
    sessionKey: r.childSessionKey,
    label: (r.label ?? "").slice(0, 48),
    task: r.task.slice(0, 72),
    status: r.status,
    pendingDescendants,
    announce: r.announce,
    ...(r.announceError ? { announceError: r.announceError } : {}),
    runtime: "subagent",
    runtimeMs: end - (r.startedAt ?? r.createdAt),
    ...(r.model ? { model: r.model } : {}),
    totalTokens: (r.usageInput ?? 0) + (r.usageOutput ?? 0),
    ...(r.usageInput !== undefined ? { inputTokens: r.usageInput, outputTokens: r.usageOutput ?? 0 } : {}),
    startedAt: r.startedAt ?? r.createdAt,
    ...(r.endedAt ? { endedAt: r.endedAt } : {}),
  };
}

type Resolved = { ok: true; run: SubagentRun } | { ok: false; error: string };

/** `last`, 1-based index (active then recent), session key, label, label prefix, runId prefix. */
export function resolveTarget(target: string | undefined, ordered: SubagentRun[]): Resolved {
  const t = (target ?? "").trim();
  if (!t) return { ok: false, error: "Missing subagent target." };
  if (t === "last") {
    const last = [...ordered].sort((a, b) => b.createdAt - a.createdAt)[0];
    return last ? { ok: true, run: last } : { ok: false, error: `Unknown subagent target: ${t}` };
  }
  if (/^\d+$/.test(t)) {
    const run = ordered[Number(t) - 1];
    return run ? { ok: true, run } : { ok: false, error: `Invalid subagent index: ${t}` };
  }
  if (t.includes(":")) {
    const run = ordered.find((r) => r.childSessionKey === t);
    return run ? { ok: true, run } : { ok: false, error: `Unknown subagent session: ${t}` };
  }
  const lower = t.toLowerCase();
  const exact = ordered.filter((r) => (r.label ?? "").toLowerCase() === lower);
  if (exact.length === 1) return { ok: true, run: exact[0]! };
  if (exact.length > 1) return { ok: false, error: `Ambiguous subagent label: ${t}` };
  const prefix = ordered.filter((r) => r.label?.toLowerCase().startsWith(lower));
  if (prefix.length === 1) return { ok: true, run: prefix[0]! };
  if (prefix.length > 1) return { ok: false, error: `Ambiguous subagent label prefix: ${t}` };
  const byRun = ordered.filter((r) => r.runId.startsWith(t));
  if (byRun.length === 1) return { ok: true, run: byRun[0]! };
  if (byRun.length > 1) return { ok: false, error: `Ambiguous subagent run id prefix: ${t}` };
  return { ok: false, error: `Unknown subagent target: ${t}` };
}

export async function subagentsTool(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SubagentsArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  const args = parsed.data;
  const action = args.action ?? "list";
  const callerIsSubagent = (caller.spawnDepth ?? 0) > 0;
  if (callerIsSubagent && caller.subagentRole !== "orchestrator") return forbidden(LEAF_CONTROL_ERROR, { action });
  const registry = new SubagentRegistry(svc.redis, svc.keys, svc.runs.ttlSeconds);
  const now = Date.now();
  const { active, recent, pending } = await listRuns(
    svc,
    registry,
    caller.sessionKey,
    args.recentMinutes ?? DEFAULT_RECENT_MINUTES,
    now,
  );
  const ordered = [...active, ...recent];

  if (action === "list") {
    const items = ordered.map((r, i) => item(r, i + 1, now, pending.get(r.runId) ?? 0));
    const text = items.length
      ? items
          .map(
            (i) =>
              `${i.index}. ${i.label || i.task} ` +
              `[${i.status}${i.status === "running" ? "" : `, announce ${i.announce}`}] ${i.sessionKey}`,
          )
          .join("\n")
      : "no subagents.";
    return {
      status: "ok",
      action,
      requesterSessionKey: caller.sessionKey,
      callerSessionKey: caller.sessionKey,
      callerIsSubagent,
      total: items.length,
      active: items.slice(0, active.length),
      recent: items.slice(active.length),
      text,
    };
  }

  if (action === "kill") {
    const t = (args.target ?? "").trim();
    if (!t) return toolError("Missing subagent target.", { action });
    const all = t === "all" || t === "*";
    // Listed as ended but replaced by a steer since the listing: see below; all of them too.
    const targets = all ? [...active, ...(await replacedSinceListing(registry, recent))] : [];
    if (!targets.length && !all) {
      const r = resolveTarget(t, ordered);
      if (!r.ok) return toolError(r.error, { action, target: t });
      // Listed as ended, but a steer may have replaced it since the listing read it (its stop of
      // the replaced run's queued turn made that turn end): the child runs on in the steer's run,
      // which the kill follows from the registry's record (suppressCurrent), not "already finished".
      const [replaced] = active.includes(r.run) ? [] : await replacedSinceListing(registry, [r.run]);
      if (replaced) targets.push(replaced);
      else if (!active.includes(r.run)) {
        const label = r.run.label || r.run.childSessionKey;
        return {
          status: "done",
          action,
          target: t,
          runId: r.run.runId,
          sessionKey: r.run.childSessionKey,
          label,
          text: `${label} is already finished.`,
        };
      } else targets.push(r.run);
    }
    if (!targets.length) return { status: "done", action, target: t, text: "no running subagents to kill." };
    const cascadeLabels: string[] = [];
    let cascadeKilled = 0;
    const killed: SubagentRun[] = [];
    for (const run of targets) {
      const tree = await suppressTree(svc, registry, run);
      // Ended meanwhile, with nothing running below it: its announce is left alone.
      if (!tree) continue;
      // The run killed: the listed one, or the run a steer started in its place since the listing.
      const current = tree.own ?? run;
      killed.push(current);
      cascadeKilled += tree.descendants.length;
      cascadeLabels.push(...tree.descendants.map((d) => d.label || d.childSessionKey));
      await stopSession(svc, run.childSessionKey);
      // A run whose turn was never queued (its spawn was cut off, or a steer's turn not queued
      // yet) has nothing to stop, and no announce job will end it: it ends here. Refused for a
      // run whose turn is queued after all (a steer's push stops it itself: queueSteerUnlessKilled).
      for (const r of [current, ...tree.descendants]) await endUnqueued(svc, registry, r, "killed");
    }
    if (!killed.length) {
      if (targets.length > 1 || all)
        return { status: "done", action, target: t, text: "no running subagents to kill." };
      const run = targets[0]!;
      const label = run.label || run.childSessionKey;
      return {
        status: "done",
        action,
        target: t,
        runId: run.runId,
        sessionKey: run.childSessionKey,
        label,
        text: `${label} is already finished.`,
      };
    }
    const one = killed.length === 1 ? killed[0]! : undefined;
    return {
      status: "ok",
      action,
      target: t,
      ...(one ? { runId: one.runId, sessionKey: one.childSessionKey, label: one.label ?? "" } : {}),
      killed: killed.length,
      ...(cascadeKilled ? { cascadeKilled, cascadeLabels } : {}),
      text: `killed ${killed.length} subagent(s).`,
    };
  }

  // steer
  const message = args.message ?? "";
  if (!message.trim()) return toolError("Missing steer message.", { action });
  if (message.length > STEER_MAX_CHARS)
    return toolError(`Message too long (${message.length} chars, max ${STEER_MAX_CHARS}).`, { action });
  const r = resolveTarget(args.target, ordered);
  if (!r.ok) return toolError(r.error, { action });
  const prev = r.run;
  if (prev.childSessionKey === caller.sessionKey) return forbidden("Subagents cannot steer themselves.", { action });
  const label = prev.label || prev.childSessionKey;
  const steered = (sessionId: string) => ({
    status: "accepted",
    action,
    mode: "restart",
    runId,
    sessionKey: prev.childSessionKey,
    sessionId,
    label,
    text: `steered ${label}.`,
  });
  const finished = {
    status: "done",
    action,
    runId: prev.runId,
    sessionKey: prev.childSessionKey,
    label,
    text: `${label} is already finished.`,
  };
  // The new run's id (src/tools/call-ids.ts). A re-run of the turn that steered repeats this call
  // and finds its steer begun: the target is then the run it started, which it must not replace
  // by itself (that would stop it and hide it from the list for good). A first attempt cut short
  // after the replace is completed: the replaced run stopped (if still running), the turn queued.
  const call = toolCallIds(caller, "subagents.steer");
  const runId = call.id(prev.childSessionKey, message);
  const begun = call.derived ? await registry.get(runId) : null;
  if (begun) {
    const child = await svc.sessions.get(begun.childSessionKey);
    if (child && !(await svc.runs.get(runId))) {
      if (begun.replaces) await stopRun(svc, begun.childSessionKey, begun.replaces);
      const text = await steerText(svc, registry, caller, begun, begun.replaces, message);
      if (!(await queueSteerUnlessKilled(svc, registry, caller, begun, child, text))) return finished;
    }
    return steered(child?.sessionId ?? "");
  }
  // Ended (its run record terminal, even before its announce ran) or killed: nothing to steer.
  if (prev.status !== "running") return finished;
  const rateKey = `${svc.keys.base}:sa:steer:${caller.sessionKey}:${prev.childSessionKey}`;
  // The window is taken in the new run's name: the same steer again (a re-run of its turn after a
  // crash, or the SET sent twice by the client after a lost answer) finds its own name, not a limit.
  if (
    !(await svc.redis.set(rateKey, runId, "PX", STEER_INTERVAL_MS, "NX")) &&
    (await svc.redis.get(rateKey)) !== runId
  ) {
    return {
      status: "rate_limited",
      action,
      error: "Steer rate limit exceeded. Wait a moment before sending another steer.",
    };
  }
  const child = await svc.sessions.get(prev.childSessionKey);
  if (!child) return toolError(`Unknown subagent session: ${prev.childSessionKey}`, { action });
  const next = steeredRun(prev, runId, caller.hop + 1);
  // Registry first, in one step that refuses a run already ended or killed: the aborted run's
  // announce then sees it was replaced and stays silent.
  if ((await registry.replace(prev, next)) !== "replaced") return finished;
  // Only prev's turn: the child's other queued turns (a grandchild's completion) stay queued.
  await stopRun(svc, prev.childSessionKey, prev.runId);
  const text = await steerText(svc, registry, caller, next, prev.runId, message);
  // A kill between the replace and the push found the new run without its turn and ended it.
  if (!(await queueSteerUnlessKilled(svc, registry, caller, next, child, text))) return finished;
  return steered(child.sessionId);
}

/**
 * What the steered run's turn says: the guidance, after the task message its spawn queued when
 * no run of the child has begun (the replaced turn was still queued when the steer dropped it,
 * so the child never saw its task). Guidance of an earlier steer that never began is replaced.
 */
async function steerText(
  svc: ToolDeps,
  registry: SubagentRegistry,
  caller: ToolCaller,
  run: SubagentRun,
  replaced: string | undefined,
  message: string,
): Promise<string> {
  // Back along the steers (each record names the run it replaced) to the spawn's run.
  for (let id = replaced, hops = 0; id && hops < MAX_STEER_CHAIN; hops++) {
    if ((await svc.runs.get(id))?.startedAt !== undefined) return message;
    id = (await registry.get(id))?.replaces;
  }
  const task = rules.childTaskMessage(run.task, run.depth, rules.maxSpawnDepthFor(svc.config, caller.agentId));
  return `${task}\n\n${message}`;
}

/** How many steers back a steer looks for a run of the child that began (a bound, not a limit met in use). */
const MAX_STEER_CHAIN = 100;

/** The steered run's turn in the child session, once per runId; its continuation is its announce. */
async function queueSteer(
  svc: ToolDeps,
  caller: ToolCaller,
  run: SubagentRun,
  child: { agentId: string; sessionId: string },
  message: string,
): Promise<void> {
  await enqueueTurn(svc, {
    runId: run.runId,
    sessionKey: run.childSessionKey,
    agentId: child.agentId,
    sessionId: child.sessionId,
    text: message,
    step: "turn",
    provenance: "inter_session",
    source: { sessionKey: caller.sessionKey, tool: "subagents" },
    hop: caller.hop + 1,
    ...(caller.traceId ? { traceId: caller.traceId } : {}),
    ...(run.runTimeoutSeconds ? { runTimeoutSeconds: run.runTimeoutSeconds } : {}),
    continuation: announceContinuation(svc, run.childSessionKey, run.runId),
  });
}

/**
 * The steered run's turn, unless a kill has suppressed the run: false when it was killed (before
 * the push: nothing is queued; after it: the turn just queued is stopped again). A kill that
 * lands between the replace and the push finds the new run without a run record, ends it and
 * frees its slot (endUnqueued), and stops nothing in it. The kill suppresses before it stops:
 * a push that reads no suppression afterwards came before the suppression, so the kill's stop
 * finds its turn (as for a spawn: src/tools/sessions-spawn.ts). A run gone from the registry
 * (dropped as cut off) is not run either.
 */
async function queueSteerUnlessKilled(
  svc: ToolDeps,
  registry: SubagentRegistry,
  caller: ToolCaller,
  run: SubagentRun,
  child: { agentId: string; sessionId: string },
  message: string,
): Promise<boolean> {
  const alive = async () => {
    const current = await registry.get(run.runId);
    return current !== null && current.suppressAnnounce !== "killed";
  };
  if (!(await alive())) return false;
  await queueSteer(svc, caller, run, child, message);
  if (await alive()) return true;
  await stopRun(svc, run.childSessionKey, run.runId);
  return false;
}

/**
 * Mark the run and every running descendant run as killed-not-announced, each refused in the
 * same step if its run has ended meanwhile (that one keeps its announce). Returns the run
 * suppressed (`own`: the listed run, or the run a steer started in its place since the listing)
 * and the descendants suppressed, or null when nothing was (the run and all below it have ended).
 */
async function suppressTree(
  svc: ToolDeps,
  registry: SubagentRegistry,
  run: SubagentRun,
): Promise<{ own?: SubagentRun; descendants: SubagentRun[] } | null> {
  // An orchestrator whose report waits for its sub-agents (announce deferred) is killed with them;
  // a run a steer replaced, in the run that replaced it (whatever the replaced one's own state).
  const follow = run.status === "running" || reportWaits(run) || run.replacedBy !== undefined;
  const own = follow ? await suppressCurrent(registry, run) : undefined;
  const descendants: SubagentRun[] = [];
  for (const r of await runningDescendants(svc, registry, run.childSessionKey))
    if ((await registry.suppressKilled(r.runId)) === "suppressed") descendants.push(r);
  return own || descendants.length ? { ...(own ? { own } : {}), descendants } : null;
}

/**
 * The registry records of those of `listed` (listed as ended) that a steer has replaced: the
 * child runs on in the steer's run, which a kill follows (suppressCurrent).
 */
async function replacedSinceListing(registry: SubagentRegistry, listed: SubagentRun[]): Promise<SubagentRun[]> {
  const fresh = await Promise.all(listed.map((r) => registry.get(r.runId)));
  return fresh.filter((r): r is SubagentRun => r?.replacedBy !== undefined);
}

/**
 * Suppress `run` as killed; when a steer replaced it after the listing, the run that replaced it
 * instead (along the steers): the child still runs (or is about to), so the kill is for that run,
 * not "already finished". Returns the run suppressed, undefined when none was (it ended).
 */
async function suppressCurrent(registry: SubagentRegistry, run: SubagentRun): Promise<SubagentRun | undefined> {
  let current: SubagentRun | null = run;
  for (let hops = 0; current && hops < MAX_STEER_CHAIN; hops++) {
    const result = await registry.suppressKilled(current.runId);
    if (result === "suppressed") return current;
    if (result !== "replaced") return undefined;
    const next: string | undefined = (await registry.get(current.runId))?.replacedBy;
    current = next ? await registry.get(next) : null;
  }
  return undefined;
}

/**
 * The registry record of the run a steer starts in place of `prev`: only what a spawn
 * registers, so nothing of prev's outcome, announce or suppression carries over.
 */
export function steeredRun(prev: SubagentRun, runId: string, hop: number): SubagentRun {
  return {
    runId,
    childSessionKey: prev.childSessionKey,
    requesterSessionKey: prev.requesterSessionKey,
    task: prev.task,
    ...(prev.label ? { label: prev.label } : {}),
    cleanup: prev.cleanup,
    depth: prev.depth,
    ...(prev.model ? { model: prev.model } : {}),
    ...(prev.runTimeoutSeconds ? { runTimeoutSeconds: prev.runTimeoutSeconds } : {}),
    createdAt: Date.now(),
    status: "running",
    announce: "pending",
    hop,
  };
}
