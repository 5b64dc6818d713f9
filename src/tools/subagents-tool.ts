/**
 * subagents: list, steer or kill the runs this session spawned (docs/concepts/subagents.md).
 * Kills cascade to descendants wherever they run (the cancel broadcast reaches every worker);
 * a steer aborts the child's current run and restarts it with the guidance, and the aborted
 * run's announce is suppressed so the requester hears only from the new one.
 */
import type { ToolDeps } from "./tool-deps.js";
import { enqueueTurn } from "../runs/enqueue.js";
import { toolCallIds } from "./call-ids.js";
import { stopSession } from "../runs/stop.js";
import { announceContinuation } from "../subagents/announce.js";
import { SubagentRegistry, type SubagentRun } from "../subagents/registry.js";
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
  const runs = await registry.forRequester(requester);
  const pending = new Map<string, number>();
  for (const r of runs)
    if (r.status !== "running")
      pending.set(r.runId, (await runningDescendants(svc, registry, r.childSessionKey)).length);
  const isActive = (r: SubagentRun) => r.status === "running" || (pending.get(r.runId) ?? 0) > 0;
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
  const registry = new SubagentRegistry(svc.redis, svc.keys);
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
    const targets = t === "all" || t === "*" ? active : [];
    if (!targets.length && t !== "all" && t !== "*") {
      const r = resolveTarget(t, ordered);
      if (!r.ok) return toolError(r.error, { action, target: t });
      if (!active.includes(r.run)) {
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
      }
      targets.push(r.run);
    }
    if (!targets.length) return { status: "done", action, target: t, text: "no running subagents to kill." };
    const cascadeLabels: string[] = [];
    let cascadeKilled = 0;
    for (const run of targets) {
      const descendants = await suppressTree(svc, registry, run);
      cascadeKilled += descendants.length;
      cascadeLabels.push(...descendants.map((d) => d.label || d.childSessionKey));
      await stopSession(svc, run.childSessionKey);
    }
    const one = targets.length === 1 ? targets[0]! : undefined;
    return {
      status: "ok",
      action,
      target: t,
      ...(one ? { runId: one.runId, sessionKey: one.childSessionKey, label: one.label ?? "" } : {}),
      killed: targets.length,
      ...(cascadeKilled ? { cascadeKilled, cascadeLabels } : {}),
      text: `killed ${targets.length} subagent(s).`,
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
  // The new run's id (src/tools/call-ids.ts). A re-run of the turn that steered repeats this call
  // and finds its steer done: the target is then the run it started, which it must not replace
  // by itself (that would stop it and hide it from the list for good).
  const call = toolCallIds(caller, "subagents.steer");
  const runId = call.id(prev.childSessionKey, message);
  if (call.derived && (await registry.get(runId))) {
    const child = await svc.sessions.get(prev.childSessionKey);
    return steered(child?.sessionId ?? "");
  }
  if (prev.status !== "running")
    return {
      status: "done",
      action,
      runId: prev.runId,
      sessionKey: prev.childSessionKey,
      label,
      text: `${label} is already finished.`,
    };
  const rateKey = `${svc.keys.base}:sa:steer:${caller.sessionKey}:${prev.childSessionKey}`;
  if (!(await svc.redis.set(rateKey, "1", "PX", STEER_INTERVAL_MS, "NX"))) {
    return {
      status: "rate_limited",
      action,
      error: "Steer rate limit exceeded. Wait a moment before sending another steer.",
    };
  }
  const child = await svc.sessions.get(prev.childSessionKey);
  if (!child) return toolError(`Unknown subagent session: ${prev.childSessionKey}`, { action });
  const next: SubagentRun = {
    ...prev,
    runId,
    createdAt: Date.now(),
    status: "running",
    announce: "pending",
    hop: caller.hop + 1,
  };
  delete next.endedAt;
  delete next.startedAt;
  delete next.frozenResult;
  // Registry first: the aborted run's announce then sees it was replaced and stays silent.
  await registry.replace(prev, next);
  await stopSession(svc, prev.childSessionKey, new Set(), { cascade: false });
  await enqueueTurn(svc, {
    runId,
    sessionKey: prev.childSessionKey,
    agentId: child.agentId,
    sessionId: child.sessionId,
    text: message,
    step: "turn",
    provenance: "inter_session",
    source: { sessionKey: caller.sessionKey, tool: "subagents" },
    hop: caller.hop + 1,
    ...(caller.traceId ? { traceId: caller.traceId } : {}),
    ...(prev.runTimeoutSeconds ? { runTimeoutSeconds: prev.runTimeoutSeconds } : {}),
    continuation: announceContinuation(svc, prev.childSessionKey, runId),
  });
  return steered(child.sessionId);
}

/** Mark the run and every running descendant run as killed-not-announced; returns the descendants. */
async function suppressTree(svc: ToolDeps, registry: SubagentRegistry, run: SubagentRun): Promise<SubagentRun[]> {
  if (run.status === "running") await registry.update(run.runId, { suppressAnnounce: "killed" });
  const out = await runningDescendants(svc, registry, run.childSessionKey);
  for (const r of out) await registry.update(r.runId, { suppressAnnounce: "killed" });
  return out;
}

/** Running sub-agent runs below `rootKey`, found through the children index (breadth first). */
async function runningDescendants(svc: ToolDeps, registry: SubagentRegistry, rootKey: string): Promise<SubagentRun[]> {
  const out: SubagentRun[] = [];
  const queue = [rootKey];
  const seen = new Set<string>(queue);
  while (queue.length) {
    const key = queue.shift()!;
    for (const childKey of await svc.sessions.childKeys(key)) {
      if (seen.has(childKey)) continue;
      seen.add(childKey);
      queue.push(childKey);
      const id = await registry.currentRunOf(childKey);
      const r = id ? await registry.get(id) : null;
      if (r && r.status === "running") out.push(r);
    }
  }
  return out;
}
