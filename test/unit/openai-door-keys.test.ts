/** The OpenAI door's session rules that refuse a request: agent mismatch, sub-agent-shaped keys, unsafe text. */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { modelChoice } from "../../src/gateway/openai-door/model-alias.js";
import { doorSessionKey, sessionAgentId } from "../../src/gateway/openai-door/session-key.js";

const config = parseConfig({ agents: { list: [{ id: "ops" }, { id: "main", default: true }] } });

describe("modelChoice", () => {
  it("tells a named agent from a default alias", () => {
    expect(modelChoice(config, "ops")).toEqual({ agentId: "ops", named: true });
    expect(modelChoice(config, "switchboard/main")).toEqual({ agentId: "main", named: true });
    for (const m of [undefined, "", "openclaw", "openclaw/default", "switchboard"])
      expect(modelChoice(config, m), String(m)).toEqual({ agentId: "main", named: false });
    expect(modelChoice(config, "gpt-4o")).toBeUndefined();
  });
});

describe("doorSessionKey refusals", () => {
  it("a header key of another agent than the one named", () => {
    expect(() => doorSessionKey(config, { agentId: "ops", agentFrom: "model", headerKey: "agent:main:room1" })).toThrow(
      /agent:main:room1 is a session of agent 'main', but model asks for agent 'ops'/,
    );
    // Nothing named: the key decides.
    expect(doorSessionKey(config, { agentId: "main", headerKey: "agent:ops:room1" })).toBe("agent:ops:room1");
    expect(sessionAgentId(config, "agent:ops:room1")).toBe("ops");
    // A bare key belongs to the agent named.
    expect(doorSessionKey(config, { agentId: "ops", agentFrom: "model", headerKey: "room1" })).toBe("agent:ops:room1");
  });

  it("a subagent segment where it does not belong; existing shapes are built as before", () => {
    expect(() => doorSessionKey(config, { agentId: "main", user: "x:subagent:y" })).toThrow(/subagent/);
    expect(() => doorSessionKey(config, { agentId: "main", headerKey: "cron:job:subagent:x" })).toThrow(/subagent/);
    expect(doorSessionKey(config, { agentId: "main", headerKey: "agent:main:subagent:abc" })).toBe(
      "agent:main:subagent:abc",
    );
    expect(doorSessionKey(config, { agentId: "main", user: "subagent" })).toBe("agent:main:openai-user:subagent");
    expect(doorSessionKey(config, { agentId: "main", user: "a:b" })).toBe("agent:main:openai-user:a:b");
  });

  it("unsafe characters: the field and its own index", () => {
    expect(() => doorSessionKey(config, { agentId: "main", user: "ab\u0000" })).toThrow(
      /^user contains U\+0000 NULL at index 2$/,
    );
    expect(() =>
      doorSessionKey(config, { agentId: "main", headerKey: "\u202Ex", headerName: "x-openclaw-session-key" }),
    ).toThrow(/^x-openclaw-session-key contains U\+202E RIGHT-TO-LEFT OVERRIDE at index 0$/);
  });
});
