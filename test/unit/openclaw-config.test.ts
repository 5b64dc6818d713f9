/**
 * A config written for OpenClaw starts: its session keys, sendPolicy spellings and commands block
 * are accepted; a misspelt key still fails at its own path with a suggestion; keys that change
 * nothing here are reported as warnings, never silently dropped.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfig, resolveSendPolicy } from "../../src/index.js";
import { loadConfig } from "../../src/config/load.js";
import { unusedKeyWarnings } from "../../src/config/unused-keys.js";
import { tempDir } from "../helpers/context.js";
import { issuesOf } from "../helpers/config-issues.js";

/** OpenClaw's documented session example (seeds), plus maintenance, commands and sendPolicy. */
const OPENCLAW_CONFIG = {
  session: {
    scope: "per-sender",
    dmScope: "main",
    identityLinks: { alice: ["telegram:123456789", "discord:987654321012345678"] },
    reset: { mode: "daily", atHour: 4, idleMinutes: 120 },
    resetByType: {
      thread: { mode: "daily", atHour: 4 },
      dm: { mode: "idle", idleMinutes: 240 },
      group: { mode: "idle", idleMinutes: 120 },
    },
    resetByChannel: { discord: { mode: "idle", idleMinutes: 10080 } },
    resetTriggers: ["/new", "/reset"],
    store: "~/.clawdbot/agents/{agentId}/sessions/sessions.json",
    mainKey: "main",
    maintenance: { mode: "enforce", pruneAfter: "30d", maxEntries: 500, rotateBytes: "10mb" },
    sendPolicy: {
      rules: [
        { action: "deny", match: { provider: "discord", chatType: "group" } },
        { action: "deny", match: { keyPrefix: "cron:" } },
      ],
      default: "allow",
    },
  },
  commands: { native: "auto", text: true, ownerAllowFrom: ["telegram:123456789"] },
};

describe("OpenClaw configs", () => {
  it("the documented OpenClaw session config parses, with durations and sizes understood", () => {
    const cfg = parseConfig(OPENCLAW_CONFIG);
    expect(cfg.session.store).toBe("~/.clawdbot/agents/{agentId}/sessions/sessions.json");
    expect(cfg.session.maintenance).toMatchObject({
      mode: "enforce",
      pruneAfterMs: 30 * 86_400_000,
      maxEntries: 500,
      rotateBytes: 10 * 1024 * 1024,
    });
    expect(parseConfig({ session: { maintenance: { pruneDays: 7 } } }).session.maintenance).toMatchObject({
      mode: "warn",
      pruneAfterMs: 7 * 86_400_000,
    });
    expect(cfg.commands.ownerAllowFrom).toEqual(["telegram:123456789"]);
  });

  it("ownerAllowFrom takes numeric ids only while a number holds them exactly (Discord ids do not)", () => {
    expect(
      parseConfig({ commands: { ownerAllowFrom: [123456789, "discord:123456789012345678"] } }).commands.ownerAllowFrom,
    ).toEqual(["123456789", "discord:123456789012345678"]);
    expect(() => parseConfig(JSON.parse('{"commands":{"ownerAllowFrom":[123456789012345678]}}'))).toThrow(
      /send larger ids as strings/,
    );
  });

  it("sendPolicy `provider` is an alias of `channel`; keyPrefix matches the key without agent:<id>:", () => {
    const cfg = parseConfig(OPENCLAW_CONFIG);
    expect(resolveSendPolicy(cfg, { sessionKey: "agent:main:discord:group:dev" })).toBe("deny");
    expect(resolveSendPolicy(cfg, { sessionKey: "agent:main:telegram:group:dev" })).toBe("allow");
    expect(resolveSendPolicy(cfg, { sessionKey: "agent:main:cron:job-1" })).toBe("deny");
    expect(
      issuesOf({
        session: { sendPolicy: { rules: [{ action: "deny", match: { provider: "slack", channel: "discord" } }] } },
      }),
    ).toEqual(['session.sendPolicy.rules[0].match.provider: alias of channel: conflicts with channel "discord"']);
  });

  it("unknown keys fail at their own path with a did-you-mean suggestion", () => {
    expect(issuesOf({ session: { resetTrigers: ["/new"] } })).toEqual([
      'session.resetTrigers: unknown key (did you mean "resetTriggers"?)',
    ]);
    expect(issuesOf({ sesion: {} })).toEqual(['sesion: unknown key (did you mean "session"?)']);
    expect(issuesOf({ session: { maintenance: { maxEntrys: 5 } } })).toEqual([
      'session.maintenance.maxEntrys: unknown key (did you mean "maxEntries"?)',
    ]);
    expect(issuesOf({ agents: { list: [{ id: "a", runtme: { kind: "echo" } }] } })).toEqual([
      'agents.list[0].runtme: unknown key (did you mean "runtime"?)',
    ]);
    expect(issuesOf({ commands: { ownerAlowFrom: [] } })).toEqual([
      'commands.ownerAlowFrom: unknown key (did you mean "ownerAllowFrom"?)',
    ]);
    expect(issuesOf({ zzzzzzzz: 1 })).toEqual(["zzzzzzzz: unknown key"]);
  });

  it("resetArchiveRetention: a wrong value says what is accepted", () => {
    const accepted = 'a duration such as "30d", "12h", "90m", or false to keep them forever';
    expect(issuesOf({ session: { maintenance: { resetArchiveRetention: true } } })).toEqual([
      `session.maintenance.resetArchiveRetention: expected ${accepted} (got true)`,
    ]);
    expect(issuesOf({ session: { maintenance: { resetArchiveRetention: 30 } } })).toEqual([
      `session.maintenance.resetArchiveRetention: expected ${accepted} (got 30)`,
    ]);
    expect(issuesOf({ session: { maintenance: { resetArchiveRetention: "forever" } } })).toEqual([
      `session.maintenance.resetArchiveRetention: not a duration: "forever" (use ${accepted})`,
    ]);
    const parsed = (v: unknown) => parseConfig({ session: { maintenance: { resetArchiveRetention: v } } });
    expect(parsed("12h").session.maintenance?.resetArchiveRetention).toBe(12 * 3_600_000);
    expect(parsed(false).session.maintenance?.resetArchiveRetention).toBe(false);
    expect(issuesOf({ session: { maintenance: { pruneAfter: "soon" } } })).toEqual([
      'session.maintenance.pruneAfter: not a duration: "soon" (use a duration such as "30d", "12h", "90m")',
    ]);
  });

  it("known-but-unused keys are listed once, as warnings, by loadConfig", () => {
    const t = tempDir("occfg");
    try {
      const file = join(t.dir, "openclaw.json5");
      writeFileSync(file, JSON.stringify(OPENCLAW_CONFIG));
      const { warnings } = loadConfig({ file, env: {} });
      expect(warnings.map((w) => w.slice(0, w.indexOf(":")))).toEqual([
        "session.store",
        "session.maintenance.rotateBytes",
        "commands.native",
        "commands.text",
      ]);
      expect(warnings[0]).toContain("switchboard import openclaw");
      expect(unusedKeyWarnings({ commands: { ownerAllowFrom: ["x"] } })).toEqual([]);
    } finally {
      t.cleanup();
    }
  });

  it("the gateway, model and workspace keys of a real OpenClaw config start, as warnings", () => {
    const openclaw = {
      gateway: { mode: "local", bind: "loopback", port: 18789 },
      agents: { defaults: { model: { primary: "fake/echo" }, workspace: "/tmp/oc/workspace" } },
      models: { mode: "replace", providers: { fake: { baseUrl: "http://127.0.0.1:18555/v1", apiKey: "fake" } } },
    };
    expect(parseConfig(openclaw).gateway.port).toBe(18789); // parses: no unknown keys
    expect(unusedKeyWarnings(openclaw).map((w) => w.slice(0, w.indexOf(":")))).toEqual([
      "gateway.mode",
      "gateway.bind",
      "agents.defaults.model",
      "agents.defaults.workspace",
      "models",
    ]);
  });

  it("model and workspace on an agent of agents.list are warnings, as under agents.defaults", () => {
    const openclaw = {
      agents: {
        defaults: { model: "fake/echo", workspace: "/tmp/oc/workspace" },
        list: [
          { id: "main", default: true, model: { primary: "fake/echo", fallbacks: [] }, workspace: "/tmp/oc/main" },
          { id: "work", workspace: "/tmp/oc/work", runtime: { kind: "echo" } },
        ],
      },
    };
    expect(parseConfig(openclaw).agents.list.map((a) => a.id)).toEqual(["main", "work"]); // no unknown keys
    const warnings = unusedKeyWarnings(openclaw);
    expect(warnings.map((w) => w.slice(0, w.indexOf(":")))).toEqual([
      "agents.defaults.model",
      "agents.defaults.workspace",
      "agents.list[0].model",
      "agents.list[0].workspace",
      "agents.list[1].workspace",
    ]);
    expect(warnings[2]).toContain("agents.list[].runtime");
    // The same types as under agents.defaults: a misspelt key or a wrong kind is still an error.
    expect(issuesOf({ agents: { list: [{ id: "a", workspace: 5, modle: "x" }] } })).toEqual([
      "agents.list[0].workspace: Invalid input: expected string, received number",
      'agents.list[0].modle: unknown key (did you mean "model"?)',
    ]);
  });
});
