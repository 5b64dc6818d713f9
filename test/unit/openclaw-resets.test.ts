/** Reset triggers, mentions and the `/new <model>` choice, as OpenClaw documents them. */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/index.js";
import { commandTextOf, effectiveResetTriggers, parseResetTrigger } from "../../src/session/reset-triggers.js";
import { modelCatalog, resolveModelChoice } from "../../src/inbound/model-choice.js";
import { resetKindOf, resetPatch } from "../../src/rotation/rotate.js";
import type { SessionEntry } from "../../src/session/session-entry.js";

describe("reset triggers", () => {
  it("configured triggers are added to /new and /reset", () => {
    expect(effectiveResetTriggers(["/fresh", "/NEW"])).toEqual(["/new", "/reset", "/fresh"]);
    const triggers = effectiveResetTriggers(["/fresh"]);
    expect(parseResetTrigger("/new x", triggers)).toMatchObject({ triggered: true, command: "new", remainder: "x" });
    expect(parseResetTrigger("/fresh", triggers)).toMatchObject({ triggered: true, command: "fresh" });
  });
  it("group command text drops leading mentions; DMs keep theirs", () => {
    expect(commandTextOf("<@U123> /new take notes", "group")).toBe("/new take notes");
    expect(commandTextOf("<@!42>, @bot: /reset", "channel")).toBe("/reset");
    expect(commandTextOf("@bot /new", "dm")).toBe("@bot /new");
    expect(commandTextOf("hello @bot /new", "group")).toBe("hello @bot /new");
  });
});

describe("/new <model>", () => {
  const catalog = modelCatalog(
    parseConfig({
      agents: {
        defaults: {
          models: {
            "anthropic/claude-opus-4": { alias: "opus" },
            "minimax/m2.7": {},
            "openai/gpt-5": {},
            "openai/gpt-5-mini": {},
          },
        },
        list: [{ id: "x", runtime: { kind: "openai", baseUrl: "http://127.0.0.1:1", model: "llama3" } }],
      },
    }),
  );
  it.each([
    ["opus write a poem", { provider: "anthropic", model: "claude-opus-4" }, "write a poem"],
    ["anthropic/claude-opus-4 hi", { provider: "anthropic", model: "claude-opus-4" }, "hi"],
    ["openai gpt-5-mini hi", { provider: "openai", model: "gpt-5-mini" }, "hi"],
    ["minimax summarize", { provider: "minimax", model: "m2.7" }, "summarize"],
    ["gpt-5 hi", { provider: "openai", model: "gpt-5" }, "hi"],
    ["llama3 go", { model: "llama3" }, "go"],
    ["claude-op tell me", { provider: "anthropic", model: "claude-opus-4" }, "tell me"],
  ])("%s", (text, want, rest) => {
    const r = resolveModelChoice(text, catalog);
    expect(r.choice).toMatchObject(want);
    expect(r.rest).toBe(rest);
  });
  it("no choice: ambiguous provider, short unknown words, plain text", () => {
    expect(resolveModelChoice("openai hi", catalog).choice).toBeUndefined();
    expect(resolveModelChoice("gpt hi", catalog)).toEqual({ rest: "gpt hi" });
    expect(resolveModelChoice("take notes", catalog)).toEqual({ rest: "take notes" });
  });
});

describe("what a new session keeps", () => {
  const old = {
    key: "agent:main:main",
    sessionId: "s1",
    agentId: "main",
    kind: "main",
    updatedAt: 1,
    createdAt: 1,
    rev: 1,
    label: "l",
    displayName: "d",
    sendPolicy: "deny",
    modelOverride: "m",
    providerOverride: "p",
    thinkingLevel: "high",
    spawnedBy: "agent:main:parent",
    totalTokens: 10,
  } as SessionEntry;
  const cleared = (kind: "operator" | "explicit" | "stale") =>
    Object.entries(resetPatch(old, "s2", "x", kind))
      .filter(([, v]) => v === null)
      .map(([k]) => k);
  it("operator reset clears only counters; /new also sendPolicy; stale also the user's toggles; lineage never", () => {
    expect(cleared("operator")).toContain("totalTokens");
    expect(cleared("operator")).not.toContain("sendPolicy");
    expect(cleared("explicit")).toContain("sendPolicy");
    expect(cleared("explicit")).not.toContain("label");
    expect(cleared("stale")).toEqual(
      expect.arrayContaining([
        "sendPolicy",
        "label",
        "modelOverride",
        "providerOverride",
        "thinkingLevel",
        "displayName",
      ]),
    );
    for (const k of ["operator", "explicit", "stale"] as const) expect(cleared(k)).not.toContain("spawnedBy");
    expect([resetKindOf("daily"), resetKindOf("idle"), resetKindOf("reset"), resetKindOf("new")]).toEqual([
      "stale",
      "stale",
      "operator",
      "operator",
    ]);
  });
});
