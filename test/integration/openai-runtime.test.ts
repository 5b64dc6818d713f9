/**
 * The openai runtime against a real local HTTP server speaking the chat-completions protocol
 * (POST /v1/chat/completions, JSON, non-streaming). The server records every request and
 * answers from a script; the session tools are a small recording invoker.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  OpenAIRuntime,
  OpenAIRuntimeError,
  RunAbortedError,
  type OpenAIRuntimeConfig,
  type RunInput,
  type ToolInvoker,
} from "../../src/runtimes/index.js";
import type { TranscriptMessage } from "../../src/history/transcript-types.js";
import { settle } from "../helpers/settle.js";

interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

interface ScriptedAnswer {
  status?: number;
  body: unknown;
  /** Wait this long before answering (the timer is cleared when the client goes away). */
  delayMs?: number;
}

type Responder = (req: RecordedRequest) => ScriptedAnswer;

class FakeChatServer {
  readonly requests: RecordedRequest[] = [];
  /** Requests whose client disconnected before the answer was sent. */
  readonly abandoned: RecordedRequest[] = [];
  private responders: Responder[] = [];
  private readonly server: Server;
  port = 0;

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const rec: RecordedRequest = {
          method: req.method ?? "",
          url: req.url ?? "",
          headers: req.headers,
          body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {},
        };
        this.requests.push(rec);
        const responder = this.responders.shift();
        const answer: ScriptedAnswer = responder
          ? responder(rec)
          : { status: 500, body: { error: { message: "no scripted answer left", type: "test" } } };
        const send = (): void => {
          res.writeHead(answer.status ?? 200, { "content-type": "application/json" });
          res.end(typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body));
        };
        if (!answer.delayMs) return send();
        const timer = setTimeout(send, answer.delayMs);
        res.on("close", () => {
          if (!res.writableEnded) {
            clearTimeout(timer);
            this.abandoned.push(rec);
          }
        });
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  script(...responders: Responder[]): void {
    this.responders = responders;
  }

  reset(): void {
    this.requests.length = 0;
    this.abandoned.length = 0;
    this.responders = [];
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve, reject) => this.server.close((e) => (e ? reject(e) : resolve())));
  }
}

function completion(
  message: Record<string, unknown>,
  usage?: { prompt_tokens: number; completion_tokens: number },
  finish = "stop",
): unknown {
  return {
    id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: "test-model-2026",
    choices: [
      { index: 0, message: { role: "assistant", content: null, ...message }, finish_reason: finish, logprobs: null },
    ],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  };
}

const TOOL_DEFS = [
  {
    name: "sessions_list",
    description: "List sessions visible to this session.",
    parameters: {
      type: "object",
      properties: { limit: { type: "integer", minimum: 1 }, kinds: { type: "array", items: { type: "string" } } },
      additionalProperties: false,
    },
  },
  {
    name: "sessions_send",
    description: "Send a message to another session.",
    parameters: {
      type: "object",
      properties: { sessionKey: { type: "string" }, message: { type: "string" } },
      required: ["message"],
    },
  },
];

class RecordingTools implements ToolInvoker {
  readonly calls: { name: string; args: Record<string, unknown> }[] = [];
  constructor(
    private readonly answer: (name: string, args: Record<string, unknown>) => unknown | Promise<unknown>,
    private readonly defs = TOOL_DEFS,
  ) {}
  definitions(): typeof TOOL_DEFS {
    return this.defs;
  }
  async call(name: string, args: Record<string, unknown>): Promise<unknown> {
    this.calls.push({ name, args });
    return this.answer(name, args);
  }
}

const KEY_ENV = "SB_TEST_OPENAI_RUNTIME_KEY";
const SECRET = "sk-test-7f3a9c1e5b";

const HISTORY: TranscriptMessage[] = [
  { role: "user", content: "hello", provenance: { kind: "external_user" } },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "should not be replayed" },
      { type: "text", text: "hi there" },
      { type: "toolCall", id: "t1", name: "sessions_list", arguments: {} },
    ],
  },
  { role: "toolResult", content: [{ type: "text", text: '{"count":0}' }], toolCallId: "t1", toolName: "sessions_list" },
  {
    role: "user",
    content: [{ type: "text", text: "status please" }],
    provenance: { kind: "inter_session", sourceSessionKey: "agent:ops:main", sourceTool: "sessions_send" },
  },
  { role: "assistant", content: "all good" },
];

const server = new FakeChatServer();

function config(over: Partial<OpenAIRuntimeConfig> = {}): OpenAIRuntimeConfig {
  return {
    kind: "openai",
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    model: "test-model",
    apiKeyEnv: KEY_ENV,
    systemPrompt: "You are a switchboard test agent.",
    temperature: 0.2,
    maxToolRounds: 4,
    ...over,
  };
}

function runInput(tools: ToolInvoker, over: Partial<RunInput> = {}): RunInput {
  return {
    runId: "run-1",
    agentId: "main",
    sessionKey: "agent:main:main",
    sessionId: "sess-1",
    text: "which sessions exist?",
    step: "turn",
    provenance: "user",
    extraSystemPrompt: "Agent-to-agent message context:\nAgent 1 (requester) session: agent:ops:main.",
    loadHistory: async () => HISTORY,
    signal: new AbortController().signal,
    tools,
    ...over,
  };
}

beforeAll(async () => {
  process.env[KEY_ENV] = SECRET;
  await server.start();
});

afterEach(() => server.reset());

afterAll(async () => {
  delete process.env[KEY_ENV];
  await server.close();
});

describe("openai runtime against a local chat-completions server", () => {
  it("sends prompt, history and tools; runs the tool call; returns the final reply with summed usage", async () => {
    const sessionsResult = { count: 1, sessions: [{ key: "agent:main:main", kind: "main" }] };
    const tools = new RecordingTools(() => sessionsResult);
    server.script(
      () => ({
        body: completion(
          {
            tool_calls: [
              {
                id: "call_1",
                type: "function",
                function: { name: "sessions_list", arguments: '{"limit":5,"kinds":["main"]}' },
              },
            ],
          },
          { prompt_tokens: 100, completion_tokens: 12 },
          "tool_calls",
        ),
      }),
      () => ({
        body: completion(
          { content: "There is 1 session: agent:main:main." },
          { prompt_tokens: 140, completion_tokens: 9 },
        ),
      }),
    );

    const out = await new OpenAIRuntime(config()).run(runInput(tools));

    expect(server.requests).toHaveLength(2);
    const [first, second] = server.requests as [RecordedRequest, RecordedRequest];
    for (const r of server.requests) {
      expect(r.method).toBe("POST");
      expect(r.url).toBe("/v1/chat/completions");
      expect(r.headers.authorization).toBe(`Bearer ${SECRET}`);
      expect(r.body.model).toBe("test-model");
      expect(r.body.temperature).toBe(0.2);
      expect(r.body.stream).toBeUndefined();
    }
    const expectedPrefix = [
      {
        role: "system",
        content:
          "You are a switchboard test agent.\n\nAgent-to-agent message context:\nAgent 1 (requester) " +
          "session: agent:ops:main.",
      },
      { role: "user", content: "hello" },
      { role: "assistant", content: "hi there" },
      {
        role: "user",
        content:
          "[Inter-session message] sourceSession=agent:ops:main sourceTool=sessions_send isUser=false\nstatus please",
      },
      { role: "assistant", content: "all good" },
      { role: "user", content: "which sessions exist?" },
    ];
    expect(first.body.messages).toEqual(expectedPrefix);
    expect(first.body.tools).toEqual(
      TOOL_DEFS.map((d) => ({
        type: "function",
        function: { name: d.name, description: d.description, parameters: d.parameters },
      })),
    );
    expect(first.body.tool_choice).toBeUndefined();

    // The tool ran through the invoker with the parsed arguments …
    expect(tools.calls).toEqual([{ name: "sessions_list", args: { limit: 5, kinds: ["main"] } }]);
    // … and its result went back to the model after the assistant's tool call.
    expect(second.body.messages).toEqual([
      ...expectedPrefix,
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "sessions_list", arguments: '{"limit":5,"kinds":["main"]}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: JSON.stringify(sessionsResult) },
    ]);
    expect(second.body.tools).toHaveLength(2);

    expect(out.reply).toBe("There is 1 session: agent:main:main.");
    expect(out.usage).toEqual({ input: 240, output: 21 });
    expect(out.model).toBe("test-model-2026");
    expect(out.toolCalls).toEqual([
      { name: "sessions_list", args: { limit: 5, kinds: ["main"] }, result: sessionsResult },
    ]);
  });

  it("an inter-session turn reaches the model marked isUser=false, with its source session and run", async () => {
    server.script(() => ({ body: completion({ content: "noted" }) }));
    const out = await new OpenAIRuntime(config()).run(
      runInput(new RecordingTools(() => ({})), {
        text: "deploy finished",
        provenance: "inter_session",
        interSession: {
          kind: "inter_session",
          sourceSessionKey: "agent:ops:main",
          sourceTool: "sessions_send",
          sourceRunId: "run-42",
        },
      }),
    );
    expect(out.reply).toBe("noted");
    const sent = (server.requests[0] as RecordedRequest).body.messages as { role: string; content: string }[];
    expect(sent.at(-1)).toEqual({
      role: "user",
      content:
        "[Inter-session message] sourceSession=agent:ops:main sourceTool=sessions_send sourceRunId=run-42 " +
        "isUser=false\ndeploy finished",
    });
  });

  it("uses the session's model override, the 'unused' key without apiKeyEnv; no tools → no tools field", async () => {
    const tools = new RecordingTools(() => null, []);
    server.script(() => ({ body: completion({ content: "REPLY_SKIP" }) }));
    const out = await new OpenAIRuntime(config({ apiKeyEnv: undefined, systemPrompt: undefined })).run(
      runInput(tools, { model: "override-model", extraSystemPrompt: undefined, loadHistory: async () => [] }),
    );
    expect(out.reply).toBe("REPLY_SKIP");
    expect(out.usage).toBeUndefined();
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0]!;
    expect(req.headers.authorization).toBe("Bearer unused");
    expect(req.body.model).toBe("override-model");
    expect(req.body.messages).toEqual([{ role: "user", content: "which sessions exist?" }]);
    expect(req.body).not.toHaveProperty("tools");
  });

  it("stops offering tools after maxToolRounds and takes the model's text", async () => {
    const tools = new RecordingTools((_name, args) => ({ status: "ok", echoed: args }));
    const toolCall = (id: string) => ({
      body: completion(
        {
          tool_calls: [{ id, type: "function", function: { name: "sessions_send", arguments: '{"message":"again"}' } }],
        },
        { prompt_tokens: 10, completion_tokens: 1 },
        "tool_calls",
      ),
    });
    server.script(
      () => toolCall("c1"),
      (req) =>
        req.body.tool_choice === "none"
          ? { body: completion({ content: "giving up on tools" }, { prompt_tokens: 20, completion_tokens: 4 }) }
          : toolCall("c2"),
    );
    const out = await new OpenAIRuntime(config({ maxToolRounds: 1 })).run(runInput(tools));
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]!.body.tool_choice).toBeUndefined();
    expect(server.requests[1]!.body.tool_choice).toBe("none");
    expect(tools.calls).toEqual([{ name: "sessions_send", args: { message: "again" } }]);
    expect(out.reply).toBe("giving up on tools");
    expect(out.usage).toEqual({ input: 30, output: 5 });
  });

  it("a throwing tool and unparsable arguments are answered with an error result; the run goes on", async () => {
    const tools = new RecordingTools(() => {
      throw new Error("target session not visible");
    });
    server.script(
      () => ({
        body: completion(
          {
            tool_calls: [
              {
                id: "a",
                type: "function",
                function: { name: "sessions_send", arguments: '{"sessionKey":"agent:x:main","message":"hi"}' },
              },
              { id: "b", type: "function", function: { name: "sessions_list", arguments: "{not json" } },
            ],
          },
          undefined,
          "tool_calls",
        ),
      }),
      () => ({ body: completion({ content: "could not reach it" }) }),
    );
    const out = await new OpenAIRuntime(config()).run(runInput(tools));
    expect(out.reply).toBe("could not reach it");
    expect(tools.calls).toEqual([{ name: "sessions_send", args: { sessionKey: "agent:x:main", message: "hi" } }]);
    const toolMessages = (
      server.requests[1]!.body.messages as { role: string; tool_call_id?: string; content: string }[]
    ).filter((m) => m.role === "tool");
    expect(toolMessages.map((m) => m.tool_call_id)).toEqual(["a", "b"]);
    expect(JSON.parse(toolMessages[0]!.content)).toEqual({ status: "error", error: "target session not visible" });
    expect(JSON.parse(toolMessages[1]!.content)).toMatchObject({
      status: "error",
      error: expect.stringContaining("invalid JSON"),
    });
    expect(out.toolCalls?.map((c) => c.name)).toEqual(["sessions_send", "sessions_list"]);
  });

  it("an HTTP 500 becomes a clear error with status and body snippet, without the key, not retried", async () => {
    server.script((req) => ({
      status: 500,
      body: {
        error: { message: `upstream exploded (auth was ${String(req.headers.authorization)})`, type: "server_error" },
      },
    }));
    const err = await new OpenAIRuntime(config())
      .run(runInput(new RecordingTools(() => null)))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAIRuntimeError);
    const e = err as OpenAIRuntimeError;
    expect(e.status).toBe(500);
    expect(e.message).toContain("HTTP 500");
    expect(e.message).toContain("upstream exploded");
    expect(e.message).toContain(`http://127.0.0.1:${server.port}/v1/chat/completions`);
    expect(e.message).not.toContain(SECRET);
    expect(e.message).toContain("Bearer ***");
    expect(server.requests).toHaveLength(1);
  });

  it("a key echoed where the snippet is cut is masked before the cut, so no part of it survives", async () => {
    server.script((req) => ({
      status: 401,
      body: { error: { message: `${"x".repeat(453)} bad key ${String(req.headers.authorization)}` } },
    }));
    const err = await new OpenAIRuntime(config())
      .run(runInput(new RecordingTools(() => null)))
      .catch((e: unknown) => e);
    const message = (err as Error).message;
    expect(message).toContain("HTTP 401");
    expect(message).not.toContain(SECRET.slice(0, 8));
  });

  it("non-JSON and non-OpenAI-shaped error bodies are quoted too", async () => {
    server.script(
      () => ({ status: 502, body: "<html>bad gateway from proxy</html>" }),
      () => ({ status: 404, body: { detail: "model 'test-model' not found" } }),
    );
    const rt = new OpenAIRuntime(config());
    const err502 = await rt.run(runInput(new RecordingTools(() => null))).catch((e: unknown) => e);
    expect(err502).toBeInstanceOf(OpenAIRuntimeError);
    expect((err502 as Error).message).toMatch(/HTTP 502: <html>bad gateway from proxy<\/html>$/);
    const err404 = await rt.run(runInput(new RecordingTools(() => null))).catch((e: unknown) => e);
    expect((err404 as OpenAIRuntimeError).status).toBe(404);
    expect((err404 as Error).message).toContain('HTTP 404: {"detail":"model \'test-model\' not found"}');
  });

  it("a configured but unset apiKeyEnv is an error naming the variable, before any request", async () => {
    const err = await new OpenAIRuntime(config({ apiKeyEnv: "SB_TEST_DEFINITELY_UNSET_KEY" }))
      .run(runInput(new RecordingTools(() => null)))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAIRuntimeError);
    expect((err as Error).message).toContain("SB_TEST_DEFINITELY_UNSET_KEY");
    expect(server.requests).toHaveLength(0);
  });

  it("aborting mid-request rejects promptly with RunAbortedError and drops the HTTP call", async () => {
    server.script(() => ({ delayMs: 5_000, body: completion({ content: "too late" }) }));
    const ac = new AbortController();
    const reason = new Error("run timeout");
    const started = performance.now();
    const p = new OpenAIRuntime(config()).run(runInput(new RecordingTools(() => null), { signal: ac.signal }));
    // Abort once the server has the request in hand.
    await settle(() => server.requests.length > 0, {
      what: "the model server to have the request",
      timeoutMs: 3_000,
      stepMs: 10,
    });
    expect(server.requests).toHaveLength(1);
    ac.abort(reason);
    const err = await p.catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(RunAbortedError);
    expect((err as RunAbortedError).reason).toBe(reason);
    expect(elapsed).toBeLessThan(1_500);
    // The server sees the client go away instead of answering 5 s later.
    await settle(() => server.abandoned.length > 0, {
      what: "the model server to see the client go away",
      timeoutMs: 2_000,
      stepMs: 10,
    });
    expect(server.abandoned).toHaveLength(1);
  });

  it("aborting while a tool runs rejects promptly and sends no further request", async () => {
    const ac = new AbortController();
    const tools = new RecordingTools(() => new Promise(() => undefined));
    server.script(() => ({
      body: completion(
        {
          tool_calls: [
            { id: "c", type: "function", function: { name: "sessions_send", arguments: '{"message":"x"}' } },
          ],
        },
        undefined,
        "tool_calls",
      ),
    }));
    const p = new OpenAIRuntime(config()).run(runInput(tools, { signal: ac.signal }));
    await settle(() => tools.calls.length > 0, { what: "the tool call to start", timeoutMs: 3_000, stepMs: 10 });
    const started = performance.now();
    ac.abort("killed");
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunAbortedError);
    expect((err as RunAbortedError).reason).toBe("killed");
    expect(performance.now() - started).toBeLessThan(500);
    expect(server.requests).toHaveLength(1);
  });

  it("a call that yields the turn ends the run there: no later call of the batch, no further request", async () => {
    let yielded: { message: string } | undefined;
    const recording = new RecordingTools((name) => {
      if (name !== "sessions_yield") return { status: "ok" };
      yielded = { message: "waiting for the researchers" };
      return { status: "yielded", message: yielded.message };
    });
    const tools: ToolInvoker = {
      definitions: () => recording.definitions(),
      call: (n, a) => recording.call(n, a),
      yielded: () => yielded,
    };
    server.script(
      () => ({
        body: completion(
          {
            content: "I will wait.",
            tool_calls: [
              { id: "a", type: "function", function: { name: "sessions_list", arguments: "{}" } },
              {
                id: "b",
                type: "function",
                function: { name: "sessions_yield", arguments: '{"message":"waiting for the researchers"}' },
              },
              { id: "c", type: "function", function: { name: "sessions_send", arguments: '{"message":"too late"}' } },
            ],
          },
          { prompt_tokens: 7, completion_tokens: 3 },
          "tool_calls",
        ),
      }),
      () => ({ body: completion({ content: "must never be asked for" }) }),
    );
    const out = await new OpenAIRuntime(config()).run(runInput(tools));
    expect(server.requests).toHaveLength(1);
    expect(recording.calls.map((c) => c.name)).toEqual(["sessions_list", "sessions_yield"]);
    expect(out).toMatchObject({
      reply: "",
      yielded: { message: "waiting for the researchers" },
      usage: { input: 7, output: 3 },
    });
    expect(out.toolCalls?.map((c) => c.name)).toEqual(["sessions_list", "sessions_yield"]);
  });
});
