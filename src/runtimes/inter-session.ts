/**
 * Inter-session input: text that arrives from another session (a sessions_send message, a
 * reply-back step, an announce step) is data routed by a tool, not something the end user wrote.
 * The receiving model sees it marked as such, on the current turn and when the history is
 * replayed, and the transcript line carries where it came from (docs/concepts/inter-session.md).
 * Pure; the marker is added once (marking marked text changes nothing).
 */
import type { Provenance } from "../history/transcript-types.js";

export const INTER_SESSION_MARKER = "[Inter-session message]";

/** Where an inter-session turn came from, as a turn carries it. */
export interface InterSessionSource {
  sessionKey: string;
  tool: string;
  channel?: string;
  /** The run that sent (or produced) the text. */
  runId?: string;
}

/** The `provenance` stored on the user message of an inter-session turn. */
export function interSessionProvenance(source: InterSessionSource): Provenance {
  return {
    kind: "inter_session",
    sourceSessionKey: source.sessionKey,
    sourceTool: source.tool,
    ...(source.channel ? { sourceChannel: source.channel } : {}),
    ...(source.runId ? { sourceRunId: source.runId } : {}),
  };
}

/**
 * `[Inter-session message] sourceSession=… sourceChannel=… sourceTool=… sourceRunId=… isUser=false` + newline + text.
 */
export function markInterSession(text: string, provenance: Provenance): string {
  if (text.startsWith(INTER_SESSION_MARKER)) return text;
  const parts = [INTER_SESSION_MARKER];
  if (provenance.sourceSessionKey) parts.push(`sourceSession=${provenance.sourceSessionKey}`);
  if (provenance.sourceChannel) parts.push(`sourceChannel=${provenance.sourceChannel}`);
  if (provenance.sourceTool) parts.push(`sourceTool=${provenance.sourceTool}`);
  if (typeof provenance.sourceRunId === "string") parts.push(`sourceRunId=${provenance.sourceRunId}`);
  parts.push("isUser=false");
  return `${parts.join(" ")}\n${text}`;
}

/** The incoming text as the model should read it: marked when it came from another session. */
export function runtimePromptText(input: { text: string; interSession?: Provenance }): string {
  return input.interSession ? markInterSession(input.text, input.interSession) : input.text;
}
