/**
 * The ids of one tool call. Called from a turn, they follow from the calling run, the call's
 * number within it, and what the call does (its target, its text): a re-run of that turn (its
 * worker died, or it was handed back at shutdown) repeats the call and lands on what the first
 * attempt started, instead of starting it again. A re-run whose model makes a different call
 * at that number gets other ids, and starts that call: it is never answered with the earlier
 * one's run. Called from outside a run (HTTP, MCP), every id is fresh.
 */
import { randomUUID } from "node:crypto";
import { uuidFrom } from "../runs/derived-id.js";
import type { ToolCaller } from "./tool-context.js";

export interface ToolCallIds {
  /** Whether ids follow from the calling run (false: fresh ids, nothing to find again). */
  readonly derived: boolean;
  /** An id for this call and `what` it is about (the same parts give the same id). */
  id(...what: string[]): string;
}

/** Takes the call's number from the caller: call it once per tool call, before any early answer. */
export function toolCallIds(caller: ToolCaller, tool: string): ToolCallIds {
  if (!caller.runId || !caller.nextCallSeq) return { derived: false, id: () => randomUUID() };
  const base = `${caller.runId}:${tool}:${caller.nextCallSeq()}`;
  return { derived: true, id: (...what) => uuidFrom([base, ...what].join("\n")) };
}
