/**
 * The contract between a worker and an agent runtime (docs/concepts/config.md, "Runtimes"). A runtime turns one
 * incoming message (plus the session's recent history) into a reply. It gets an AbortSignal:
 * `/stop`, `subagents kill` and `runTimeoutSeconds` abort it, and it must stop promptly.
 */
import type { Provenance, TranscriptMessage } from "../history/transcript-types.js";

/** Which step of the system asked for this turn: ordinary turn, reply-back step, or announce. */
export type RunStep = "turn" | "reply" | "announce";

/** Where the incoming text came from, as the script runtime's `when.provenance` sees it. */
export type RunProvenance = "user" | "inter_session" | "system";

export interface ToolCallResult {
  name: string;
  args: Record<string, unknown>;
  result: unknown;
}

/** Lets a runtime call the session tools as the session it is running in. */
export interface ToolInvoker {
  /** JSON schemas of the tools this session may call (offered to LLMs as function tools). */
  definitions(): { name: string; description: string; parameters: Record<string, unknown> }[];
  call(name: string, args: Record<string, unknown>): Promise<unknown>;
  /**
   * Set once a tool call of this turn ended the turn on purpose (`sessions_yield`): its message.
   * A runtime checks it after every tool call and, when set, stops right there (no further tool
   * call, no further model request) and returns `{ reply: "", yielded }`. Optional: invokers
   * that never yield leave it out.
   */
  yielded?(): TurnYielded | undefined;
}

/**
 * Makes the invoker of one run, as the running session. Declared beside the invoker: the tools
 * implement it and the turn executor consumes it, and neither imports the other.
 */
export type ToolInvokerFactory = (ctx: {
  sessionKey: string;
  agentId: string;
  runId: string;
  sandboxed: boolean;
  hop?: number;
  traceId?: string;
  /** Stored lineage: decides the session's tool list (docs/concepts/subagents.md). */
  spawnDepth?: number;
  subagentRole?: "orchestrator" | "leaf";
}) => ToolInvoker;

/** The turn ended through `sessions_yield`: it has no reply; the next turn is the awaited event. */
export interface TurnYielded {
  /** What the caller passed to sessions_yield (default "Turn yielded."). */
  message: string;
}

export interface RunInput {
  runId: string;
  agentId: string;
  sessionKey: string;
  sessionId: string;
  text: string;
  step: RunStep;
  provenance: RunProvenance;
  /** Set when `text` came from another session: where from. Runtimes that build a prompt mark
   *  the text with it (`runtimePromptText`), so the model never takes it for the user's words. */
  interSession?: Provenance;
  /** Context for agent-to-agent steps (OpenClaw's extraSystemPrompt). */
  extraSystemPrompt?: string;
  /** Recent transcript messages, oldest first, not including `text`. A function, so runtimes
   *  that never look at history (echo, script) cost no transcript read per turn. */
  loadHistory(): Promise<TranscriptMessage[]>;
  signal: AbortSignal;
  tools: ToolInvoker;
  /** Model override for this session, if any. */
  model?: string;
}

export interface RunOutput {
  reply: string;
  usage?: { input: number; output: number };
  model?: string;
  /** Tool calls made during the turn, in order (recorded in the transcript). */
  toolCalls?: ToolCallResult[];
  /** The turn yielded (see ToolInvoker.yielded): `reply` is "" and is never delivered. */
  yielded?: TurnYielded;
}

export interface AgentRuntime {
  readonly kind: string;
  run(input: RunInput): Promise<RunOutput>;
}

/** Thrown when a run is aborted; the worker maps the abort reason to killed/timeout. */
export class RunAbortedError extends Error {
  constructor(readonly reason: unknown) {
    super(`run aborted: ${reason instanceof Error ? reason.message : String(reason)}`);
    this.name = "RunAbortedError";
  }
}
