/**
 * The one sanitiser for text that leaves a session for somewhere else: the reply sessions_send
 * returns, the text of a reply-back turn, an announce posted to a channel, a chat reply, a
 * sub-agent's completion result. What a model wrote for itself or for the tool machinery
 * (reasoning blocks, tool-call scaffolding, control tokens, memory blocks; the list is in
 * normalize-text.ts) never reaches another agent or a person, whichever path carries it.
 *
 * The transcript keeps the original (it is the session's own record); only the hand-off is
 * cleaned. Credentials are not masked here: a reply is what the agent chose to say, whereas
 * history readers get redaction (sanitize-history.ts). Pure; idempotent.
 */
import { normalizeAssistantText } from "./normalize-text.js";
import { isSilentReply } from "./silent-reply.js";

export function sanitizeForHandoff(text: string | null | undefined): string {
  if (typeof text !== "string" || text.length === 0) return "";
  return normalizeAssistantText(text).text.trim();
}

/**
 * What a person in a chat gets of a reply: its hand-off text, or undefined when the reply is
 * silent there (`NO_REPLY`, or nothing). Channel deliveries and the OpenAI door both use it.
 */
export function chatReply(text: string | null | undefined): string | undefined {
  const reply = sanitizeForHandoff(text);
  return isSilentReply("channel", reply) ? undefined : reply;
}
