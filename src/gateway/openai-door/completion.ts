/**
 * The answer objects of the chat-completions API (`chat.completion` and `chat.completion.chunk`),
 * built from a finished run. Pure.
 */
import { chatReply } from "../../history/handoff.js";
import type { RunRecord } from "../../runs/run-records.js";

export interface CompletionIds {
  /** `chatcmpl-<runId>`: the run can be looked up with GET /v1/runs/<runId>. */
  id: string;
  model: string;
  created: number;
}

export function completionIds(runId: string, model: string, now = Date.now()): CompletionIds {
  return { id: `chatcmpl-${runId}`, model, created: Math.floor(now / 1000) };
}

export function usageOf(rec: RunRecord): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const input = rec.usage?.input ?? 0;
  const output = rec.usage?.output ?? 0;
  return { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
}

/** The reply as a chat client gets it, as a channel would (chatReply): "" when silent. */
export function visibleReply(rec: RunRecord): string {
  return chatReply(rec.reply) ?? "";
}

export function chatCompletion(ids: CompletionIds, rec: RunRecord) {
  return {
    id: ids.id,
    object: "chat.completion" as const,
    created: ids.created,
    model: ids.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant" as const, content: visibleReply(rec), refusal: null },
        logprobs: null,
        finish_reason: "stop" as const,
      },
    ],
    usage: usageOf(rec),
  };
}

export function chunk(
  ids: CompletionIds,
  delta: { role?: "assistant"; content?: string },
  finishReason: "stop" | null = null,
) {
  return {
    id: ids.id,
    object: "chat.completion.chunk" as const,
    created: ids.created,
    model: ids.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
}

/** The last chunk of a stream asked for `stream_options.include_usage`: usage, no choices. */
export function usageChunk(ids: CompletionIds, rec: RunRecord) {
  return {
    id: ids.id,
    object: "chat.completion.chunk" as const,
    created: ids.created,
    model: ids.model,
    choices: [],
    usage: usageOf(rec),
  };
}
