/**
 * One message size limit for every door (docs/concepts/limits.md): inbound, RPC, session tools
 * and the OpenAI door measure a message's text in UTF-8 bytes against gateway.limits.messageBytes
 * and refuse a larger one with the same 413 payload_too_large naming the limit; bodies over the
 * body limit get the same answer. A small limit keeps the requests small.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpJson, startTestSystem, type TestSystem } from "../helpers/system.js";
import { parseConfig } from "../../src/config/index.js";
import { DEFAULT_MESSAGE_BYTES, defaultBodyBytes } from "../../src/text/message-size.js";
import { createToolRuntime } from "../../src/tools/tool-runtime.js";
import { sessionCaller } from "../../src/tools/session-caller.js";

const LIMIT = 2048;
const BODY_LIMIT = defaultBodyBytes(LIMIT);
const OPENAI_BODY_LIMIT = 8192;
/** 683 × "€" (3 bytes each): 2049 bytes in 683 characters, over the limit by bytes, not by characters. */
const OVER = "€".repeat(683);
/** 682 × "€": 2046 bytes, within the limit. */
const WITHIN = "€".repeat(682);

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { limits: { messageBytes: LIMIT }, openai: { bodyBytes: OPENAI_BODY_LIMIT } },
    maintenance: { sweepEveryMs: 3_600_000 },
    agents: { defaults: { runtime: { kind: "script", rules: [{ reply: "ok" }] } } },
    tools: { sessions: { visibility: "all" } },
  });
});

afterAll(async () => {
  await sys?.close();
});

function expectTooLarge(r: { status: number; body: any }, field: string) {
  expect(r.status).toBe(413);
  expect(r.body).toEqual({
    ok: false,
    error: {
      code: "payload_too_large",
      message: expect.stringContaining(`${LIMIT} bytes`),
      limitBytes: LIMIT,
      field,
      sizeBytes: 2049,
    },
  });
}

describe("a message over the limit: 413 with the limit, at every door", () => {
  it("POST /v1/inbound (text)", async () => {
    const msg = { channel: "tg", chatType: "dm", from: "u1" };
    expectTooLarge(await sys.post("/v1/inbound", { ...msg, text: OVER }), "text");
    const ok = await sys.post("/v1/inbound", { ...msg, text: WITHIN });
    expect(ok.status).toBe(202);
    expect(ok.body.runId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("POST /v1/rpc/agent and /v1/rpc/send (message)", async () => {
    expectTooLarge(await sys.post("/v1/rpc/agent", { sessionKey: "limits", message: OVER }), "message");
    expectTooLarge(await sys.post("/v1/rpc/send", { channel: "tg", to: "u1", message: OVER }), "message");
    const ok = await sys.post("/v1/rpc/agent", { sessionKey: "limits", message: WITHIN });
    expect(ok.body.ok).toBe(true);
    const done = await sys.rpc("agent.wait", { runId: ok.body.result.runId, timeoutMs: 10_000 });
    expect(done.status).toBe("ok");
  });

  it("POST /v1/tools/sessions_send (args.message) and sessions_spawn (args.task)", async () => {
    expectTooLarge(
      await sys.post("/v1/tools/sessions_send", {
        sessionKey: "main",
        args: { sessionKey: "limits", message: OVER, timeoutSeconds: 0 },
      }),
      "args.message",
    );
    expectTooLarge(
      await sys.post("/v1/tools/sessions_spawn", { sessionKey: "main", args: { task: OVER } }),
      "args.task",
    );
    // Within the limit the tool's own answer comes back (the old 100 KB schema cap no longer undercuts the limit).
    const ok = await sys.post("/v1/tools/sessions_send", {
      sessionKey: "main",
      args: { sessionKey: "limits", message: WITHIN, timeoutSeconds: 0 },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe("accepted");
  });

  it("POST /tools/invoke and MCP tool calls (the tool runtime's own check)", async () => {
    const invoked = await sys.post("/tools/invoke", {
      tool: "sessions_spawn",
      sessionKey: "main",
      args: { task: OVER },
    });
    expect(invoked.status).toBe(413);
    expect(invoked.body).toMatchObject({ ok: false, error: { type: "payload_too_large" } });
    expect(JSON.stringify(invoked.body)).toContain("args.task");
    // What the MCP server calls for `tools/call`.
    const runtime = createToolRuntime(sys.svc);
    const caller = await sessionCaller(sys.svc, "main");
    await expect(runtime.call("sessions_send", caller, { sessionKey: "limits", message: OVER })).rejects.toMatchObject({
      code: "payload_too_large",
    });
    expect(
      await runtime.call("sessions_send", caller, { sessionKey: "limits", message: WITHIN, timeoutSeconds: 0 }),
    ).toMatchObject({
      status: "accepted",
    });
  });

  it("POST /v1/chat/completions (the last user message), in OpenAI's shape", async () => {
    const client = new OpenAI({ baseURL: `${sys.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const err = await client.chat.completions
      .create({ model: "main", messages: [{ role: "user", content: OVER }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(413);
    expect(err.code).toBe("payload_too_large");
    expect(err.error).toMatchObject({
      type: "invalid_request_error",
      code: "payload_too_large",
      limitBytes: LIMIT,
      field: "messages[0].content",
      sizeBytes: 2049,
    });
    const ok = await client.chat.completions.create({ model: "main", messages: [{ role: "user", content: WITHIN }] });
    expect(ok.choices[0]!.message.content).toBe("ok");
  });
});

describe("a body over the body limit: the same 413, naming both limits", () => {
  it("inbound, RPC and tools bodies beyond 2 × messageBytes + 64 KiB", async () => {
    const filler = "x".repeat(BODY_LIMIT + 10);
    for (const [path, body] of [
      ["/v1/inbound", { channel: "tg", chatType: "dm", from: "u1", text: filler }],
      ["/v1/rpc/agent", { message: filler }],
      ["/v1/tools/sessions_send", { sessionKey: "main", args: { message: filler } }],
    ] as const) {
      const r = await sys.post(path, body);
      expect(r.status, path).toBe(413);
      expect(r.body, path).toEqual({
        ok: false,
        error: {
          code: "payload_too_large",
          message: expect.stringContaining(`${BODY_LIMIT} bytes`),
          limitBytes: LIMIT,
          bodyLimitBytes: BODY_LIMIT,
        },
      });
    }
  });

  it("the OpenAI door's larger body limit (clients resend the conversation), in OpenAI's shape", async () => {
    // History beyond the message limit but within the door's body limit is fine: it is not sent on.
    const history = [{ role: "assistant" as const, content: "y".repeat(4000) }];
    const client = new OpenAI({ baseURL: `${sys.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const ok = await client.chat.completions.create({
      model: "main",
      messages: [...history, { role: "user", content: "short" }],
    });
    expect(ok.choices[0]!.message.content).toBe("ok");
    const r = await httpJson("POST", `${sys.url}/v1/chat/completions`, {
      model: "main",
      messages: [{ role: "user", content: "z".repeat(OPENAI_BODY_LIMIT) }],
    });
    expect(r.status).toBe(413);
    expect(r.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "payload_too_large",
      limitBytes: LIMIT,
      bodyLimitBytes: OPENAI_BODY_LIMIT,
    });
  });
});

describe("config", () => {
  it("defaults: 1 MiB of message text, a body limit of 2 × that + 64 KiB; bodyBytes below messageBytes refused", () => {
    const cfg = parseConfig({});
    expect(cfg.gateway.limits.messageBytes).toBe(DEFAULT_MESSAGE_BYTES);
    expect(DEFAULT_MESSAGE_BYTES).toBe(1024 * 1024);
    expect(defaultBodyBytes(DEFAULT_MESSAGE_BYTES)).toBe(2 * 1024 * 1024 + 64 * 1024);
    expect(() => parseConfig({ gateway: { limits: { messageBytes: 4096, bodyBytes: 2048 } } })).toThrow(/bodyBytes/);
  });
});
