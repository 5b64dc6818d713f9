import type { z } from "zod";
import { zodIssues } from "../config/parse.js";
/** Who is calling a session tool, and from where in an agent-to-agent chain. */
export interface ToolCaller {
  sessionKey: string;
  agentId: string;
  sandboxed: boolean;
  /** Hops taken by the chain the calling run belongs to (0 for a person's message). */
  hop: number;
  traceId?: string;
  runId?: string;
  /** Per-run counter of side-effecting tool calls: a re-run of the same turn makes the same
   *  calls in the same order, so ids derived from (runId, seq) repeat and dedupe. */
  nextCallSeq?: () => number;
  /** Stored lineage of the calling session (tool profiles: leaf sub-agents get no session tools). */
  spawnDepth?: number;
  subagentRole?: "orchestrator" | "leaf";
  /** Set by sessions_yield: the runtime should end its turn (later tool calls are refused). */
  onYield?: (message: string) => void;
}

export type ToolResult = Record<string, unknown> & { status?: string };

export function forbidden(error: string, extra: Record<string, unknown> = {}): ToolResult {
  return { status: "forbidden", error, ...extra };
}

export function toolError(error: string, extra: Record<string, unknown> = {}): ToolResult {
  return { status: "error", error, ...extra };
}

/** Invalid tool arguments, every problem as `path: message`, as a tool result (not a throw). */
export function argsError(error: z.ZodError, extra: Record<string, unknown> = {}): ToolResult {
  return toolError(
    zodIssues(error)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; "),
    extra,
  );
}
