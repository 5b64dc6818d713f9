/** The OpenAI door's pure rules: model aliases, the session a request talks to, the turn's text. */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { agentForModel, modelIds } from "../../src/gateway/openai-door/model-alias.js";
import { parseChatCompletionRequest, turnInputOf } from "../../src/gateway/openai-door/request.js";
import { doorSessionKey, firstHeader } from "../../src/gateway/openai-door/session-key.js";
import { messageTextsOf, assertMessageSize } from "../../src/gateway/message-limit.js";
import { PayloadTooLargeError } from "../../src/errors/index.js";

const config = parseConfig({ agents: { list: [{ id: "ops" }, { id: "main", default: true }, { id: "default" }] } });
const bare = parseConfig({});

describe("agentForModel", () => {
  it("maps every alias to its agent", () => {
    for (const m of [
      "main",
      "switchboard/main",
      "openclaw/main",
      "openclaw:main",
      "agent:main",
      "MAIN",
      " Switchboard/Main ",
    ])
      expect(agentForModel(config, m), m).toBe("main");
    for (const m of [undefined, "", "openclaw", "switchboard"]) expect(agentForModel(config, m)).toBe("main");
    expect(agentForModel(config, "ops")).toBe("ops");
    expect(agentForModel(config, "switchboard/ops")).toBe("ops");
  });

  it("an agent literally called default wins over the alias; without it, default means the default agent", () => {
    expect(agentForModel(config, "openclaw/default")).toBe("default");
    expect(agentForModel(bare, "openclaw/default")).toBe("main");
    expect(agentForModel(bare, "switchboard/default")).toBe("main");
  });

  it("unknown agents and other model names name nothing", () => {
    for (const m of ["gpt-4o", "switchboard/nobody", "openclaw/", "x/main", "main/ops"])
      expect(agentForModel(config, m), m).toBeUndefined();
  });

  it("lists one model per agent plus openclaw/default", () => {
    expect(modelIds(config)).toEqual([
      "switchboard/main",
      "switchboard/ops",
      "switchboard/default",
      "openclaw/default",
    ]);
    expect(modelIds(bare)).toEqual(["switchboard/main", "openclaw/default"]);
  });
});

describe("doorSessionKey", () => {
  it("header › user › a new session per request", () => {
    expect(doorSessionKey(config, { agentId: "ops", user: "Alice", headerKey: "agent:main:room" })).toBe(
      "agent:main:room",
    );
    expect(doorSessionKey(config, { agentId: "ops", headerKey: "room" })).toBe("agent:ops:room");
    expect(doorSessionKey(config, { agentId: "ops", headerKey: "main" })).toBe("agent:ops:main");
    expect(doorSessionKey(config, { agentId: "ops", user: " Alice " })).toBe("agent:ops:openai-user:alice");
    expect(doorSessionKey(config, { agentId: "ops", newId: () => "abc" })).toBe("agent:ops:openai:abc");
  });

  it("refuses junk keys like every door", () => {
    expect(() => doorSessionKey(config, { agentId: "ops", headerKey: "agent::x" })).toThrow(/malformed/);
    expect(() => doorSessionKey(config, { agentId: "ops", user: "a\u0001b" })).toThrow(/U\+0001/);
  });

  it("reads the first header present", () => {
    expect(firstHeader({ "x-b": "2", "x-a": " 1 " }, ["x-a", "x-b"])).toBe("1");
    expect(firstHeader({ "x-a": ["", "y"], "x-b": "2" }, ["x-a", "x-b"])).toBe("2");
    expect(firstHeader({}, ["x-a"])).toBeUndefined();
  });
});

describe("turnInputOf", () => {
  const input = (messages: unknown[]) => turnInputOf(parseChatCompletionRequest({ model: "main", messages }));

  it("takes the last user message; system and developer messages become the system prompt", () => {
    expect(
      input([
        { role: "system", content: "s1" },
        { role: "user", content: "old" },
        { role: "assistant", content: "a" },
        { role: "developer", content: [{ type: "text", text: "s2" }] },
        {
          role: "user",
          content: [
            { type: "text", text: "new" },
            { type: "image_url", image_url: { url: "data:x" } },
            { type: "text", text: "line" },
          ],
        },
        { role: "assistant", content: null },
      ]),
    ).toEqual({ text: "new\nline", field: "messages[4].content", systemPrompt: "s1\n\ns2" });
  });

  it("refuses requests without user text, and unknown shapes", () => {
    expect(() => input([{ role: "assistant", content: "a" }])).toThrow(/user message/);
    expect(() => input([{ role: "user", content: "   " }])).toThrow(/user message/);
    expect(() => parseChatCompletionRequest({ model: "main", messages: [] })).toThrow(/invalid/);
    expect(() => parseChatCompletionRequest({ model: "main" })).toThrow(/invalid/);
  });

  it("ignores the sampling parameters clients send", () => {
    expect(
      parseChatCompletionRequest({
        model: "m",
        temperature: 0.2,
        max_tokens: 5,
        tools: [],
        messages: [{ role: "user", content: "x" }],
      }).model,
    ).toBe("m");
  });
});

describe("messageTextsOf / assertMessageSize", () => {
  it("finds each door's message text", () => {
    expect(messageTextsOf("/v1/inbound", {}, { text: "t" })).toEqual([{ field: "text", text: "t" }]);
    expect(messageTextsOf("/v1/rpc/:method", { method: "agent" }, { message: "m" })).toEqual([
      { field: "message", text: "m" },
    ]);
    expect(messageTextsOf("/v1/rpc/:method", { method: "send" }, { message: "m" })).toEqual([
      { field: "message", text: "m" },
    ]);
    expect(messageTextsOf("/v1/rpc/:method", { method: "sessions.list" }, { message: "m" })).toEqual([]);
    expect(messageTextsOf("/v1/tools/:name", { name: "sessions_spawn" }, { args: { task: "t" } })).toEqual([
      { field: "args.task", text: "t" },
    ]);
    expect(messageTextsOf("/v1/runs/:id", {}, undefined)).toEqual([]);
    expect(messageTextsOf("/v1/inbound", {}, { text: 5 })).toEqual([]);
  });

  it("measures UTF-8 bytes, not characters", () => {
    expect(() => assertMessageSize(6, [{ field: "f", text: "€€" }])).not.toThrow();
    const err = (() => {
      try {
        assertMessageSize(6, [{ field: "f", text: "€€a" }]);
      } catch (e) {
        return e;
      }
    })() as PayloadTooLargeError;
    expect(err).toBeInstanceOf(PayloadTooLargeError);
    expect(err.code).toBe("payload_too_large");
    expect(err.details).toEqual({ limitBytes: 6, field: "f", sizeBytes: 7 });
  });
});
