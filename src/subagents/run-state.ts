/**
 * Where a sub-agent run stands, as the tools report it. The registry's status changes only in
 * the run's announce job, which may not have run yet: a run whose run record is terminal has
 * ended already, and a run a kill suppressed counts as killed at once (as in OpenClaw). A run
 * that ended but whose report waits for its own sub-agents (announce deferred) is still active.
 */
import type { RunDeps } from "../runs/run-deps.js";
import { isTerminal } from "../runs/turn.js";
import type { SubagentRun } from "./registry.js";

/** The registry record with the outcome known so far (see the module comment). */
export async function withOutcome(svc: Pick<RunDeps, "runs">, r: SubagentRun): Promise<SubagentRun> {
  if (r.status !== "running") return r;
  const rec = await svc.runs.get(r.runId);
  if (rec && isTerminal(rec.status))
    return {
      ...r,
      status: rec.status,
      endedAt: rec.endedAt ?? Date.now(),
      ...(rec.startedAt ? { startedAt: rec.startedAt } : {}),
    };
  if (r.suppressAnnounce === "killed") return { ...r, status: "killed", endedAt: Date.now() };
  return r;
}

/** A run that ended but whose report waits for its own sub-agents (src/subagents/announce.ts). */
export function reportWaits(run: SubagentRun): boolean {
  return run.announce === "deferred";
}
