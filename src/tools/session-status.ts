/**
 * session_status (docs/concepts/tools.md, "session_status"): the /status card of a visible session; `model` sets or
 * clears its override.
 */
import type { ToolDeps } from "./tool-deps.js";
import { agentRuntime } from "../config/agents.js";
import { statusCard } from "../session/status-card.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { displaySessionKey } from "../session/key-canonical.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { guard } from "./access.js";
import { SubagentRegistry, type SubagentRun } from "../subagents/registry.js";
import { reportWaits, withOutcome } from "../subagents/run-state.js";
import { resolveSessionRef } from "./resolve-ref.js";
import { invalidModelError } from "../subagents/spawn-policy.js";
import { SessionStatusArgs } from "./schemas.js";
import { toolError, type ToolCaller, type ToolResult, argsError } from "./tool-context.js";

export async function sessionStatus(svc: ToolDeps, caller: ToolCaller, rawArgs: unknown): Promise<ToolResult> {
  const parsed = SessionStatusArgs.safeParse(rawArgs ?? {});
  if (!parsed.success) return argsError(parsed.error);
  const args = parsed.data;
  const ref = await resolveSessionRef(svc, caller, args.sessionKey ?? "current");
  if (!ref.ok) return { status: ref.status, error: ref.error };
  const g = await guard(svc, caller, "status", ref.key);
  if (!g.allowed) return { status: g.status, error: g.error };
  let entry = await svc.sessions.get(ref.key);
  if (!entry) return toolError(`Unknown sessionKey: ${args.sessionKey ?? ref.key}`);
  let changedModel = false;
  if (args.model) {
    const value = args.model.toLowerCase() === "default" ? null : args.model;
    // The same rule sessions_spawn applies: the override is sent as the runtime's model on every turn.
    const invalid = value === null ? undefined : invalidModelError(value);
    if (invalid) return toolError(invalid);
    // With its stale instant: an override on a session untouched since its reset expires with it.
    entry = await writeSessionSettings(svc, ref.key, { modelOverride: value }, { before: entry });
    changedModel = true;
  }
  const [depth, running] = await Promise.all([svc.inbox.depth(ref.key), svc.inbox.hasInflight(ref.key)]);
  const runtime = agentRuntime(svc.config, entry.agentId);
  const text = statusCard(entry, {
    queueDepth: depth,
    running,
    sendPolicy: sessionSendPolicy(svc.config, ref.key, entry),
    ...(runtime.kind === "openai" ? { model: runtime.model } : {}),
  });
  const sessionKey = displaySessionKey(svc.config, ref.key, caller.agentId);
  // Running sub-agents of that session (docs/concepts/subagents.md): a run whose record says it
  // ended is not, even before its announce job has marked the registry; one whose report waits
  // for sub-agents of its own still is.
  const runningChildren: SubagentRun[] = [];
  for (const r of await new SubagentRegistry(svc.redis, svc.keys).forRequester(ref.key, 50))
    if (r.status === "running" && ((await withOutcome(svc, r)).status === "running" || reportWaits(r)))
      runningChildren.push(r);
  const subagents = runningChildren.map((r) => ({
    runId: r.runId,
    sessionKey: r.childSessionKey,
    label: r.label ?? "",
    task: r.task.slice(0, 72),
    startedAt: r.startedAt ?? r.createdAt,
  }));
  const fullText = subagents.length
    ? `${text}\n🤖 Subagents: ${subagents.length} running (${subagents.map((s) => s.label || s.sessionKey).join(", ")})`
    : text;
  return {
    status: "ok",
    text: fullText,
    details: {
      ok: true,
      sessionKey,
      changedModel,
      statusText: fullText,
      model: entry.modelOverride ?? null,
      subagents,
    },
  };
}
