/**
 * The OpenAI-compatible door, driven by the `openai` npm client against a whole Switchboard
 * (gateway + workers, script runtime, real Redis): non-streaming and streaming answers, model
 * aliases, the `user` field and the session-key headers picking the session, auth, sendPolicy,
 * per-session order, and errors in OpenAI's shape.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpJson, startTestSystem, type TestSystem } from "../helpers/system.js";
import { userTexts as transcriptUserTexts } from "../helpers/api.js";

const TOKEN = "openai-door-token-0123";

let sys: TestSystem;
let client: OpenAI;

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { auth: { token: TOKEN } },
    maintenance: { sweepEveryMs: 3_600_000 },
    agents: {
      defaults: {
        runtime: {
          kind: "script",
          rules: [
            { when: { contains: "boom" }, fail: "kaboom" },
            { when: { contains: "slow" }, delayMs: 400, reply: "slow done" },
            { when: { contains: "ponder" }, reply: "<think>private reasoning</think>Visible answer" },
            { when: { contains: "hush" }, reply: "NO_REPLY" },
            { reply: "{{agentId}}|{{sessionKey}}|{{text}}", usage: { input: 7, output: 3 } },
          ],
        },
      },
      list: [{ id: "main", default: true }, { id: "ops" }],
    },
    session: {
      sendPolicy: {
        rules: [{ action: "deny", match: { rawKeyPrefix: "agent:main:openai-user:blocked" } }],
        default: "allow",
      },
    },
  });
  client = new OpenAI({ baseURL: `${sys.url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20_000 });
});

afterAll(async () => {
  await sys?.close();
});

/** The user texts of a session's transcript, oldest first. */
const userTexts = (sessionKey: string) => transcriptUserTexts(sys, sessionKey);

describe("POST /v1/chat/completions, non-streaming", () => {
  it("answers the agent's reply as a chat.completion; only the last user message becomes the turn", async () => {
    const { data, response } = await client.chat.completions
      .create({
        model: "switchboard/main",
        user: "alice",
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "an earlier question" },
          { role: "assistant", content: "an earlier answer" },
          { role: "user", content: "hello there" },
        ],
      })
      .withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.model).toBe("switchboard/main");
    expect(data.choices[0]!.message.role).toBe("assistant");
    expect(data.choices[0]!.message.content).toBe("main|agent:main:openai-user:alice|hello there");
    expect(data.choices[0]!.finish_reason).toBe("stop");
    expect(data.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
    const runId = response.headers.get("x-switchboard-run-id")!;
    expect(data.id).toBe(`chatcmpl-${runId}`);
    expect(response.headers.get("x-switchboard-session-key")).toBe("agent:main:openai-user:alice");
    const run = await sys.get(`/v1/runs/${runId}`);
    expect(run.body.status).toBe("ok");
    // Earlier messages were not replayed: the session's transcript is the history.
    expect(await userTexts("agent:main:openai-user:alice")).toEqual(["hello there"]);
  });

  it("text content parts are joined; a request without a user message is a 400 in OpenAI's shape", async () => {
    const r = await client.chat.completions.create({
      model: "main",
      user: "parts",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "line one" },
            { type: "text", text: "line two" },
          ],
        },
      ],
    });
    expect(r.choices[0]!.message.content).toBe("main|agent:main:openai-user:parts|line one\nline two");
    const err = await client.chat.completions
      .create({ model: "main", messages: [{ role: "system", content: "only a system prompt" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.status).toBe(400);
    expect(err.type).toBe("invalid_request_error");
    expect(err.code).toBe("invalid_request");
  });

  it("a failed run answers 500 with the run's error", async () => {
    const err = await client.chat.completions
      .create({ model: "main", user: "failing", messages: [{ role: "user", content: "boom" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.code).toBe("run_error");
    expect(err.message).toMatch(/kaboom/);
  });
});

describe("streaming", () => {
  it("answers SSE chunks in OpenAI's format that the client collects into the reply", async () => {
    const stream = await client.chat.completions.create({
      model: "openclaw/default",
      user: "streamer",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "stream me" }],
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe("main|agent:main:openai-user:streamer|stream me");
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finish.map((c) => c.choices[0]!.finish_reason)).toEqual(["stop"]);
    // include_usage: a last chunk with the usage and no choices.
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  });

  it("is text/event-stream with data: lines and a final data: [DONE]", async () => {
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "ops", stream: true, messages: [{ role: "user", content: "raw" }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = (await res.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const payloads = events
      .slice(0, -1)
      .filter((e) => e.startsWith("data: "))
      .map((e) => JSON.parse(e.slice(6)));
    expect(payloads.map((p) => p.choices[0].delta.content ?? "").join("")).toMatch(
      /^ops\|agent:ops:openai:[0-9a-f-]{36}\|raw$/,
    );
  });

  it("a failed run ends the stream with an error event the client raises", async () => {
    const stream = await client.chat.completions.create({
      model: "main",
      user: "failing-stream",
      stream: true,
      messages: [{ role: "user", content: "boom" }],
    });
    const err = await (async () => {
      for await (const _c of stream) {
        // drain
      }
    })().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.message).toMatch(/kaboom/);
  });
});

describe("model aliases", () => {
  it.each([
    ["main", "main"],
    ["switchboard/main", "main"],
    ["openclaw/default", "main"],
    ["openclaw", "main"],
    ["ops", "ops"],
    ["switchboard/ops", "ops"],
    ["openclaw/ops", "ops"],
    ["agent:ops", "ops"],
  ])("%s talks to agent %s", async (model, agentId) => {
    const r = await client.chat.completions.create({
      model,
      user: "alias-check",
      messages: [{ role: "user", content: "who" }],
    });
    expect(r.choices[0]!.message.content).toBe(`${agentId}|agent:${agentId}:openai-user:alias-check|who`);
    expect(r.model).toBe(model);
  });

  it("an agent-id header picks the agent over the model (Switchboard's and OpenClaw's names)", async () => {
    for (const header of ["x-switchboard-agent-id", "x-openclaw-agent-id"]) {
      const r = await client.chat.completions.create(
        { model: "main", user: "by-header", messages: [{ role: "user", content: "h" }] },
        { headers: { [header]: "ops" } },
      );
      expect(r.choices[0]!.message.content, header).toBe("ops|agent:ops:openai-user:by-header|h");
    }
    const err = await client.chat.completions
      .create(
        { model: "main", messages: [{ role: "user", content: "h" }] },
        { headers: { "x-openclaw-agent-id": "nobody" } },
      )
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("an unknown model is a 404 model_not_found", async () => {
    const err = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.code).toBe("model_not_found");
    expect(err.param).toBe("model");
  });

  it("answers what a chat would get: no reasoning text, and a silent reply as no text", async () => {
    const ponder = await client.chat.completions.create({
      model: "main",
      messages: [{ role: "user", content: "ponder" }],
    });
    expect(ponder.choices[0]!.message.content).toBe("Visible answer");
    const hush = await client.chat.completions.create({ model: "main", messages: [{ role: "user", content: "hush" }] });
    expect(hush.choices[0]!.message.content).toBe("");
    const stream = await client.chat.completions.create({
      model: "main",
      stream: true,
      messages: [{ role: "user", content: "ponder" }],
    });
    let streamed = "";
    for await (const c of stream) streamed += c.choices[0]?.delta?.content ?? "";
    expect(streamed).toBe("Visible answer");
  });

  it("GET /v1/models lists every agent and openclaw/default; retrieve answers one", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(["openclaw/default", "switchboard/main", "switchboard/ops"]);
    const one = await client.models.retrieve("switchboard/ops");
    expect(one).toMatchObject({ id: "switchboard/ops", object: "model", owned_by: "switchboard" });
    await expect(client.models.retrieve("nope")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // A model id is decoded once: `%25` is the id "%" (not found), never a server error.
    const res = await fetch(`${sys.url}/v1/models/%25`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: "model_not_found" } });
  });
});

describe("which session: a key with non-ASCII text in the header", () => {
  it("is read as UTF-8, the same session the RPC door names with that text", async () => {
    const utf8 = (text: string) => Buffer.from(text, "utf8").toString("latin1"); // the bytes on the wire
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        "x-switchboard-session-key": utf8("agent:main:café-東京"),
      },
      body: JSON.stringify({ model: "main", messages: [{ role: "user", content: "bonjour" }] }),
    });
    expect(res.status).toBe(200);
    // Sent back percent-encoded: a header value cannot carry 東京 as such.
    expect(decodeURIComponent(res.headers.get("x-switchboard-session-key")!)).toBe("agent:main:café-東京");
    const run = await sys.svc.runs.get(res.headers.get("x-switchboard-run-id")!);
    expect(run?.sessionKey).toBe("agent:main:café-東京");
    expect(await sys.svc.sessions.get("agent:main:café-東京")).not.toBeNull();
    // Bytes that are not UTF-8 are refused, not turned into another key.
    const bad = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        "x-switchboard-session-key": "caf\u00e9",
      },
      body: JSON.stringify({ model: "main", messages: [{ role: "user", content: "bonjour" }] }),
    });
    expect(bad.status).toBe(400);
  });
});

describe("which session", () => {
  it("the same user talks to the same session, in order; no user means a new session per request", async () => {
    await client.chat.completions.create({
      model: "main",
      user: "Bob",
      messages: [{ role: "user", content: "first" }],
    });
    await client.chat.completions.create({
      model: "main",
      user: "Bob",
      messages: [{ role: "user", content: "second" }],
    });
    // Keys are canonical (lowercase), like every key entering Switchboard.
    expect(await userTexts("agent:main:openai-user:bob")).toEqual(["first", "second"]);

    const a = await client.chat.completions
      .create({ model: "main", messages: [{ role: "user", content: "anon" }] })
      .withResponse();
    const b = await client.chat.completions
      .create({ model: "main", messages: [{ role: "user", content: "anon" }] })
      .withResponse();
    const ka = a.response.headers.get("x-switchboard-session-key")!;
    const kb = b.response.headers.get("x-switchboard-session-key")!;
    expect(ka).toMatch(/^agent:main:openai:[0-9a-f-]{36}$/);
    expect(kb).toMatch(/^agent:main:openai:[0-9a-f-]{36}$/);
    expect(ka).not.toBe(kb);
  });

  it("a session-key header overrides the user (Switchboard's and OpenClaw's header names)", async () => {
    const r1 = await client.chat.completions.create(
      { model: "main", user: "ignored", messages: [{ role: "user", content: "via header" }] },
      { headers: { "x-switchboard-session-key": "agent:main:team-room" } },
    );
    expect(r1.choices[0]!.message.content).toBe("main|agent:main:team-room|via header");
    const r2 = await client.chat.completions.create(
      { model: "main", messages: [{ role: "user", content: "via openclaw header" }] },
      { headers: { "x-openclaw-session-key": "team-room" } },
    );
    // A bare key belongs to the requested agent.
    expect(r2.choices[0]!.message.content).toBe("main|agent:main:team-room|via openclaw header");
    expect(await userTexts("agent:main:team-room")).toEqual(["via header", "via openclaw header"]);
    const other = await sys.rpc("sessions.list", { search: "openai-user:ignored" });
    expect(other.count).toBe(0);
  });

  it("turns of one session run in order across doors: a second request waits for the first", async () => {
    const slow = await client.chat.completions
      .create({ model: "main", user: "ordered", stream: true, messages: [{ role: "user", content: "slow one" }] })
      .withResponse();
    // The stream's headers are out: the slow turn is queued. Now a fast one, through the RPC door.
    const fast = await sys.rpc("agent", { sessionKey: "agent:main:openai-user:ordered", message: "fast one" });
    let text = "";
    for await (const c of slow.data) text += c.choices[0]?.delta.content ?? "";
    expect(text).toBe("slow done");
    await sys.rpc("agent.wait", { runId: fast.runId, timeoutMs: 10_000 });
    const slowRun = (await sys.get(`/v1/runs/${slow.response.headers.get("x-switchboard-run-id")}`)).body;
    const fastRun = (await sys.get(`/v1/runs/${fast.runId}`)).body;
    expect(fastRun.startedAt).toBeGreaterThanOrEqual(slowRun.endedAt);
    expect(await userTexts("agent:main:openai-user:ordered")).toEqual(["slow one", "fast one"]);
  });
});

describe("auth and policy", () => {
  it("refuses a wrong or missing token with 401 in OpenAI's shape", async () => {
    const bad = new OpenAI({ baseURL: `${sys.url}/v1`, apiKey: "wrong-token-000000", maxRetries: 0 });
    const err = await bad.chat.completions
      .create({ model: "main", messages: [{ role: "user", content: "hi" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.code).toBe("unauthorized");
    await expect(bad.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const raw = await httpJson(
      "POST",
      `${sys.url}/v1/chat/completions`,
      { model: "main", messages: [{ role: "user", content: "hi" }] },
      {},
    );
    expect(raw.status).toBe(401);
    expect(raw.body).toEqual({
      error: { message: expect.any(String), type: "authentication_error", param: null, code: "unauthorized" },
    });
    // Nothing ran for the refused requests.
    expect(
      (await sys.rpc("sessions.list", { search: "openai" })).sessions.every(
        (s: { key: string }) => !s.key.includes("wrong"),
      ),
    ).toBe(true);
  });

  it("a sendPolicy deny answers 403 send_blocked and runs nothing", async () => {
    const err = await client.chat.completions
      .create({ model: "main", user: "blocked-1", messages: [{ role: "user", content: "let me in" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(err.code).toBe("send_blocked");
    expect(await userTexts("agent:main:openai-user:blocked-1")).toEqual([]);
    // The same session through the RPC door is refused the same way.
    const rpc = await httpJson(
      "POST",
      `${sys.url}/v1/rpc/agent`,
      { sessionKey: "agent:main:openai-user:blocked-1", message: "x" },
      { authorization: `Bearer ${TOKEN}` },
    );
    expect(rpc.body.error.code).toBe("send_blocked");
    // A per-session override applies too.
    await client.chat.completions.create({
      model: "main",
      user: "later-blocked",
      messages: [{ role: "user", content: "one" }],
    });
    await sys.rpc("sessions.patch", { key: "agent:main:openai-user:later-blocked", sendPolicy: "deny" });
    await expect(
      client.chat.completions.create({
        model: "main",
        user: "later-blocked",
        messages: [{ role: "user", content: "two" }],
      }),
    ).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(await userTexts("agent:main:openai-user:later-blocked")).toEqual(["one"]);
  });
});
