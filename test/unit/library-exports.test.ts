/**
 * docs/concepts/library.md: the package's main export (built output, referenced by `exports`) offers the pure
 * session logic. Imported by package name (Node's self-reference), exactly as embedders do.
 */
import { describe, expect, it } from "vitest";

describe('import … from "switchboard"', () => {
  it("exposes the pure session logic, working, with no Redis", async () => {
    const sb = await import("switchboard");
    const config = sb.parseConfig({
      session: {
        dmScope: "per-channel-peer",
        sendPolicy: { rules: [{ action: "deny", match: { channel: "discord", chatType: "group" } }] },
      },
    });
    expect(sb.resolveInboundSession(config, { channel: "telegram", chatType: "dm", from: "123" })).toEqual({
      agentId: "main",
      sessionKey: "agent:main:telegram:dm:123",
      mainSessionKey: "agent:main:main",
    });
    expect(sb.canonicalSessionKey(config, "MAIN")).toBe("agent:main:main");
    expect(sb.canonicalSessionKey(config, "agent:main:telegram:direct:5")).toBe("agent:main:telegram:dm:5");
    const policy = sb.resolveResetPolicy(config, { sessionKey: "agent:main:main" });
    expect(policy.mode).toBe("daily");
    expect(policy.atHour).toBe(4);
    expect(sb.evaluateFreshness({ updatedAt: 0, now: 1, policy: { mode: "off" } }).fresh).toBe(true);
    expect(sb.resolveSendPolicy(config, { sessionKey: "agent:main:discord:group:1" })).toBe("deny");
    expect(sb.resolveSendPolicy(config, { sessionKey: "agent:main:main" })).toBe("allow");
    const h = sb.sanitizeHistory([{ role: "assistant", content: "token sk-1234567890abcdef1234 <think>x</think>ok" }]);
    expect(h.contentRedacted).toBe(true);
    expect(JSON.stringify(h.messages)).not.toContain("1234567890abcdef");
    expect(() => sb.parseConfig({ bogus: 1 })).toThrow(sb.ConfigError);
  });
});
