/**
 * `openai` runtime (docs/concepts/config.md, "Runtimes"): any OpenAI-compatible chat-completions endpoint, with the
 * session tools offered as function tools.
 *
 * Request: `POST <baseUrl>/chat/completions` (so `baseUrl` normally ends in `/v1`), non-streaming,
 * `Authorization: Bearer <process.env[apiKeyEnv]>` ("unused" when no `apiKeyEnv` is configured;
 * a configured but unset variable is an error). Messages, in order:
 *   - one system message: `systemPrompt` and the run's `extraSystemPrompt`, joined by a blank
 *     line (omitted when both are empty);
 *   - the history: user/assistant messages as text (text blocks joined by "\n"; thinking and
 *     tool-call blocks, toolResult/system/tool messages and empty messages are left out); user
 *     messages from another session get OpenClaw's marker line (docs/concepts/inter-session.md)
 *     `[Inter-session message] sourceSession=<key> sourceChannel=<ch> sourceTool=<tool>` (missing
 *     parts omitted, never added twice);
 *   - the incoming text as a user message.
 * Tool loop: while fewer than `maxToolRounds` rounds have run, the tools are offered
 * (`tool_choice` auto); every function call the model makes is run through `input.tools.call`
 * and answered with a `tool` message (the result JSON-encoded). A call with unparsable
 * arguments or a tool that throws is answered with `{status:"error", error}` so the model can
 * react; the run goes on. Once the rounds are used up the tools stay declared (the history
 * refers to them) but with `tool_choice: "none"`, and whatever the model says is the reply.
 * A call that yields the turn (`sessions_yield`) ends the run at once: the calls after it in
 * the same batch are not made, no further request is sent, the reply is "" (`yielded` set).
 *
 * Every request carries `input.signal`; an abort (also while a tool runs) rejects with
 * RunAbortedError(signal.reason). The client does not retry on its own (maxRetries 0 unless
 * given): a retry would add latency the run timeout does not see; BullMQ retries the job.
 * Endpoint failures become OpenAIRuntimeError with the HTTP status and a body snippet; the URL
 * is shown without credentials or query and the API key is redacted from any echoed text.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import type { RuntimeConfig } from "../config/schema.js";
import type { TranscriptMessage } from "../history/transcript-types.js";
import { markInterSession, runtimePromptText } from "./inter-session.js";

import { RunAbortedError, type AgentRuntime, type RunInput, type RunOutput, type ToolCallResult } from "./types.js";
import { throwIfAborted, untilAborted } from "./abort.js";

export type OpenAIRuntimeConfig = Extract<RuntimeConfig, { kind: "openai" }>;

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type ChatTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;
type ChatRequest = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
type ChatResponse = OpenAI.Chat.Completions.ChatCompletion;

export interface OpenAIRuntimeOptions {
  /** Retries of one request by the HTTP client on 408/409/429/5xx/connection errors. Default 0. */
  maxRetries?: number;
  /** Per-request timeout in ms. Default: the client's (10 minutes); the run timeout aborts sooner. */
  timeoutMs?: number;
}

/** The endpoint failed (HTTP error, connection error, malformed answer). */
export class OpenAIRuntimeError extends Error {
  constructor(
    message: string,
    /** HTTP status when the endpoint answered with an error status. */
    readonly status?: number,
  ) {
    super(message);
    this.name = "OpenAIRuntimeError";
  }
}

const SNIPPET_CHARS = 500;

/**
 * The text of a transcript message: a string, or its text blocks joined by newlines. Lines this
 * process did not write (an import, another tool on the shared storage) may hold any JSON as
 * content: anything else is no text, never an error, or one odd line would fail every turn of
 * the session while it stays in the history window.
 */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts: string[] = [];
  for (const block of content as unknown[]) {
    if (!block || typeof block !== "object") continue;
    const { type, text } = block as { type?: unknown; text?: unknown };
    if (type === "text" && typeof text === "string") parts.push(text);
  }
  return parts.join("\n");
}

/** History (oldest first) as chat messages; see the module comment for what is left out. */
export function historyToChatMessages(history: readonly TranscriptMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const msg of history) {
    if (msg.role !== "user" && msg.role !== "assistant") continue;
    let text = messageText(msg.content);
    if (text.length === 0) continue;
    if (msg.role === "user") {
      if (msg.provenance?.kind === "inter_session") text = markInterSession(text, msg.provenance);
      out.push({ role: "user", content: text });
    } else {
      out.push({ role: "assistant", content: text });
    }
  }
  return out;
}

export function buildChatMessages(
  cfg: Pick<OpenAIRuntimeConfig, "systemPrompt">,
  input: Pick<RunInput, "extraSystemPrompt" | "text" | "interSession"> & { history: readonly TranscriptMessage[] },
): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const system = [cfg.systemPrompt, input.extraSystemPrompt].filter(
    (s): s is string => typeof s === "string" && s.trim().length > 0,
  );
  if (system.length > 0) messages.push({ role: "system", content: system.join("\n\n") });
  messages.push(...historyToChatMessages(input.history));
  messages.push({ role: "user", content: runtimePromptText(input) });
  return messages;
}

function safeUrl(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
  } catch {
    return "<invalid baseUrl>";
  }
}

function redact(text: string, secret: string): string {
  if (secret.length < 4 || secret === "unused") return text;
  return text.split(secret).join("***");
}

function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > SNIPPET_CHARS ? `${flat.slice(0, SNIPPET_CHARS)}…` : flat;
}

function parseArguments(raw: string): { args: Record<string, unknown> } | { error: string } {
  if (raw.trim() === "") return { args: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    return { error: `invalid JSON in tool arguments: ${(err as Error).message}` };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return { error: "tool arguments must be a JSON object" };
  return { args: parsed as Record<string, unknown> };
}

function encodeToolResult(result: unknown): string {
  if (typeof result === "string") return result;
  try {
    return JSON.stringify(result) ?? "null";
  } catch {
    return String(result);
  }
}

export class OpenAIRuntime implements AgentRuntime {
  readonly kind = "openai";
  private readonly maxRetries: number;
  private readonly timeoutMs: number | undefined;

  constructor(
    private readonly cfg: OpenAIRuntimeConfig,
    options: OpenAIRuntimeOptions = {},
  ) {
    this.maxRetries = options.maxRetries ?? 0;
    this.timeoutMs = options.timeoutMs;
  }

  private apiKey(): string {
    const name = this.cfg.apiKeyEnv;
    if (name === undefined) return "unused";
    const value = process.env[name];
    if (value === undefined || value === "")
      throw new OpenAIRuntimeError(`openai runtime: environment variable ${name} (apiKeyEnv) is not set`);
    return value;
  }

  async run(input: RunInput): Promise<RunOutput> {
    const { signal, tools: invoker } = input;
    throwIfAborted(signal);
    const apiKey = this.apiKey();
    // The raw body of the last error response: the client keeps only its `error` member, and
    // OpenAI-compatible servers do not all use that shape.
    const failure: { body?: string } = {};
    const client = new OpenAI({
      baseURL: this.cfg.baseUrl,
      apiKey,
      // Do not pick up OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment for a foreign endpoint.
      organization: null,
      project: null,
      maxRetries: this.maxRetries,
      ...(this.timeoutMs !== undefined ? { timeout: this.timeoutMs } : {}),
      fetch: async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const res = await fetch(url, init);
        if (!res.ok) {
          try {
            failure.body = await res.clone().text();
          } catch {
            failure.body = undefined;
          }
        }
        return res;
      },
    });
    const model = input.model ?? this.cfg.model;
    const messages = buildChatMessages(this.cfg, { ...input, history: await input.loadHistory() });
    const tools: ChatTool[] = invoker.definitions().map((d) => ({
      type: "function",
      function: { name: d.name, description: d.description, parameters: d.parameters },
    }));

    const usage = { input: 0, output: 0 };
    let sawUsage = false;
    let servedBy: string | undefined;
    const toolCalls: ToolCallResult[] = [];

    for (let round = 0; ; round++) {
      const offerTools = tools.length > 0 && round < this.cfg.maxToolRounds;
      const body: ChatRequest = { model, messages };
      if (this.cfg.temperature !== undefined) body.temperature = this.cfg.temperature;
      if (offerTools) body.tools = tools;
      else if (tools.length > 0 && round > 0) {
        body.tools = tools;
        body.tool_choice = "none";
      }

      failure.body = undefined;
      const completion = await this.request(client, body, signal, apiKey, failure);
      if (completion.usage) {
        sawUsage = true;
        usage.input += completion.usage.prompt_tokens ?? 0;
        usage.output += completion.usage.completion_tokens ?? 0;
      }
      if (typeof completion.model === "string" && completion.model !== "") servedBy = completion.model;
      const message = completion.choices?.[0]?.message;
      if (!message)
        throw new OpenAIRuntimeError(
          `openai runtime: ${safeUrl(this.cfg.baseUrl)}/chat/completions returned no choices`,
        );

      const calls = (message.tool_calls ?? []).filter(
        (c): c is OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall => c.type === "function",
      );
      if (!offerTools || calls.length === 0) {
        const out: RunOutput = { reply: message.content ?? "", model: servedBy ?? model };
        if (sawUsage) out.usage = usage;
        if (toolCalls.length > 0) out.toolCalls = toolCalls;
        return out;
      }

      messages.push({
        role: "assistant",
        content: message.content ?? null,
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.function.name, arguments: c.function.arguments },
        })),
      });
      for (const call of calls) {
        throwIfAborted(signal);
        const name = call.function.name;
        const parsed = parseArguments(call.function.arguments ?? "");
        let args: Record<string, unknown> = {};
        let result: unknown;
        if ("error" in parsed) {
          result = { status: "error", error: parsed.error };
        } else {
          args = parsed.args;
          try {
            result = await untilAborted(
              Promise.resolve().then(() => invoker.call(name, args)),
              signal,
            );
          } catch (err) {
            if (err instanceof RunAbortedError) throw err;
            if (signal.aborted) throw new RunAbortedError(signal.reason);
            result = { status: "error", error: err instanceof Error ? err.message : String(err) };
          }
        }
        toolCalls.push({ name, args, result });
        messages.push({ role: "tool", tool_call_id: call.id, content: encodeToolResult(result) });
        // sessions_yield ended the turn: the rest of the batch and the next request are skipped.
        const yielded = invoker.yielded?.();
        if (yielded) {
          const out: RunOutput = { reply: "", model: servedBy ?? model, toolCalls, yielded };
          if (sawUsage) out.usage = usage;
          return out;
        }
      }
      throwIfAborted(signal);
    }
  }

  private async request(
    client: OpenAI,
    body: ChatRequest,
    signal: AbortSignal,
    apiKey: string,
    failure: { body?: string },
  ): Promise<ChatResponse> {
    const where = `${safeUrl(this.cfg.baseUrl)}/chat/completions`;
    try {
      return await client.chat.completions.create(body, { signal });
    } catch (err) {
      if (signal.aborted) throw new RunAbortedError(signal.reason);
      if (err instanceof APIUserAbortError) throw new RunAbortedError(err);
      if (err instanceof APIConnectionTimeoutError)
        throw new OpenAIRuntimeError(`openai runtime: POST ${where} timed out`);
      if (err instanceof APIConnectionError) {
        const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
        throw new OpenAIRuntimeError(redact(`openai runtime: POST ${where} failed: connection error${cause}`, apiKey));
      }
      if (err instanceof APIError && typeof err.status === "number") {
        const detail =
          failure.body !== undefined && failure.body.trim() !== ""
            ? failure.body
            : err.error !== undefined && err.error !== null
              ? encodeToolResult(err.error)
              : err.message.replace(/^\d{3}\s+/, "");
        throw new OpenAIRuntimeError(
          // Masked before the cut: a key echoed across the cut would survive it half, unrecognised.
          redact(
            `openai runtime: POST ${where} failed with HTTP ${err.status}: ${snippet(redact(detail, apiKey))}`,
            apiKey,
          ),
          err.status,
        );
      }
      const msg = err instanceof Error ? err.message : String(err);
      throw new OpenAIRuntimeError(
        redact(`openai runtime: POST ${where} failed: ${snippet(redact(msg, apiKey))}`, apiKey),
      );
    }
  }
}
