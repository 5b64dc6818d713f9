/**
 * The chat-completions request as this door reads it. Lenient where OpenAI clients differ
 * (sampling parameters, tools, response formats are accepted and ignored: the agent's runtime
 * decides those), strict about what the door needs: a `messages` array with a user message.
 */
import { z } from "zod";
import { zodIssues } from "../../config/parse.js";
import { ValidationError } from "../../errors/index.js";
import { safeString } from "../../session/safe-text-schema.js";

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

const ChatMessage = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  name: z.string().optional(),
});

export const ChatCompletionRequest = z.looseObject({
  model: z
    .string()
    .trim()
    .max(200)
    .optional()
    .describe('`"<agentId>"`, `"switchboard/<agentId>"`, `"openclaw/default"` (the default agent)…'),
  messages: z
    .array(ChatMessage)
    .min(1)
    .describe("only the last user message is sent; the session's own transcript is the history"),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  // Checked as sent (the index in an error is the client's own), then trimmed.
  user: safeString("user")
    .min(1)
    .max(256)
    .optional()
    .describe("picks the session `agent:<agentId>:openai-user:<user>`"),
});
export type ChatCompletionRequest = z.output<typeof ChatCompletionRequest>;

/** Longest combined system prompt passed on (the `agent` RPC's extraSystemPrompt bound). */
export const MAX_SYSTEM_PROMPT_CHARS = 100_000;

export interface TurnInput {
  /** The last user message: the turn's text. */
  text: string;
  /** Path of that text in the request, for size errors. */
  field: string;
  /** System and developer messages, joined: passed on as the turn's extra system prompt. */
  systemPrompt?: string;
}

export function parseChatCompletionRequest(body: unknown): ChatCompletionRequest {
  const r = ChatCompletionRequest.safeParse(body ?? {});
  if (!r.success) throw new ValidationError("invalid chat completion request", zodIssues(r.error));
  return r.data;
}

/** The text of a message: a string, or its text parts joined by newlines (images are not read). */
export function contentText(content: z.output<typeof ChatMessage>["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content
    .filter((p) => (p.type === "text" || p.type === "input_text") && typeof p.text === "string")
    .map((p) => p.text as string)
    .join("\n");
}

/**
 * What one request turns into. Earlier user and assistant messages are not replayed: the
 * session keeps its own transcript, which is the history the agent sees.
 */
export function turnInputOf(req: ChatCompletionRequest): TurnInput {
  let last = -1;
  for (let i = req.messages.length - 1; i >= 0; i--) {
    if (req.messages[i]!.role === "user") {
      last = i;
      break;
    }
  }
  const text = last >= 0 ? contentText(req.messages[last]!.content) : "";
  if (!text.trim()) {
    throw new ValidationError("messages must contain a user message with text", [
      { path: "messages", message: "no user message with text" },
    ]);
  }
  const system = req.messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => contentText(m.content).trim())
    .filter(Boolean)
    .join("\n\n");
  if (system.length > MAX_SYSTEM_PROMPT_CHARS) {
    throw new ValidationError(`system messages exceed ${MAX_SYSTEM_PROMPT_CHARS} characters`, [
      { path: "messages", message: "system prompt too long" },
    ]);
  }
  return { text, field: `messages[${last}].content`, ...(system ? { systemPrompt: system } : {}) };
}
