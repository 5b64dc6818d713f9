/**
 * The one silent-reply rule (OpenClaw's silent tokens): which replies mean "say nothing", and
 * where. A reply is silent in a context when, trimmed and in any case, it is exactly one of
 * that context's tokens (`" no_reply\n"` is NO_REPLY; `"NO_REPLY, thanks"` is a reply), or
 * when it is empty and the context counts an empty reply as silence.
 */

/** Reply-back step: "do not answer the other session". */
export const REPLY_SKIP = "REPLY_SKIP";
/** Announce step: "post nothing to the channel". */
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
/** Ordinary turn: "say nothing"; such assistant messages are hidden from history. */
export const NO_REPLY = "NO_REPLY";

export type SilentContext = "channel" | "reply-back" | "announce" | "subagent-announce" | "history";

/**
 * Where each token silences a reply:
 *  - channel: a turn's reply to the chat it came from (src/workers/turn-executor.ts) is not delivered;
 *  - reply-back: the agent-to-agent ping-pong stops (src/tools/a2a-flow.ts);
 *  - announce: the agent-to-agent announce is not posted (src/tools/a2a-flow.ts);
 *  - subagent-announce: a finished sub-agent's result is not announced (src/subagents/announce.ts;
 *    an empty result is still announced, as "no output");
 *  - history: the assistant message is left out of history (src/history/sanitize-history.ts).
 */
export const SILENT_RULES: Record<SilentContext, { tokens: readonly string[]; emptyIsSilent: boolean }> = {
  channel: { tokens: [NO_REPLY, REPLY_SKIP, ANNOUNCE_SKIP], emptyIsSilent: true },
  "reply-back": { tokens: [NO_REPLY, REPLY_SKIP], emptyIsSilent: true },
  announce: { tokens: [NO_REPLY, REPLY_SKIP, ANNOUNCE_SKIP], emptyIsSilent: true },
  "subagent-announce": { tokens: [NO_REPLY, ANNOUNCE_SKIP], emptyIsSilent: false },
  history: { tokens: [NO_REPLY], emptyIsSilent: false },
};

/** True when `text` is exactly `token` once trimmed, in any case. Non-strings are never silent. */
export function isSilentToken(text: unknown, token: string): boolean {
  return typeof text === "string" && text.trim().toLowerCase() === token.toLowerCase();
}

export const isReplySkip = (text: unknown): boolean => isSilentToken(text, REPLY_SKIP);
export const isAnnounceSkip = (text: unknown): boolean => isSilentToken(text, ANNOUNCE_SKIP);
export const isNoReply = (text: unknown): boolean => isSilentToken(text, NO_REPLY);

/** Whether `reply` says nothing in `context` (see SILENT_RULES). */
export function isSilentReply(context: SilentContext, reply: string | undefined): boolean {
  const rule = SILENT_RULES[context];
  if ((reply ?? "").trim() === "") return rule.emptyIsSilent;
  return rule.tokens.some((token) => isSilentToken(reply, token));
}
