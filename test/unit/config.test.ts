import { describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, loadConfig, defaultAgentId } from "../../src/config/index.js";
import { ConfigError } from "../../src/errors/index.js";
import { issuesOf } from "../helpers/config-issues.js";

describe("config defaults", () => {
  it("an empty config gets OpenClaw's defaults", () => {
    const c = parseConfig({});
    expect(c.redis).toEqual({ url: "redis://127.0.0.1:6379", prefix: "sb" });
    expect(c.gateway.port).toBe(7420);
    expect(c.session.dmScope).toBe("main");
    expect(c.session.mainKey).toBe("main");
    expect(c.session.resetTriggers).toEqual(["/new", "/reset"]);
    expect(c.session.agentToAgent.maxPingPongTurns).toBe(5);
    expect(c.tools.sessions.visibility).toBe("tree");
    expect(c.tools.agentToAgent.enabled).toBe(false);
    expect(c.agents.defaults.subagents.maxSpawnDepth).toBe(1);
    expect(c.agents.defaults.subagents.maxChildrenPerAgent).toBe(5);
    expect(c.agents.defaults.runtime).toEqual({ kind: "echo" });
    expect(c.agents.defaults.sandbox.sessionToolsVisibility).toBe("spawned");
    expect(defaultAgentId(c)).toBe("main");
  });

  it("default agent is the one marked default, else the first", () => {
    expect(defaultAgentId(parseConfig({ agents: { list: [{ id: "ops" }, { id: "main2", default: true }] } }))).toBe(
      "main2",
    );
    expect(defaultAgentId(parseConfig({ agents: { list: [{ id: "ops" }, { id: "b" }] } }))).toBe("ops");
  });
});

describe("config errors list every problem as path: message", () => {
  it("rejects unknown keys at any depth", () => {
    const issues = issuesOf({ sesion: {}, session: { dmScope: "main", bogus: 1 } });
    expect(issues.some((i) => i.startsWith("(root)") || i.includes("sesion"))).toBe(true);
    expect(issues.some((i) => i.includes("session") && i.includes("bogus"))).toBe(true);
  });

  it("reports several problems at once with paths", () => {
    const issues = issuesOf({
      session: { dmScope: "per-nobody", reset: { atHour: 25, timezone: "Mars/Olympus" } },
      agents: { list: [{ id: "Bad Id" }] },
      tools: { sessions: { visibility: "everyone" } },
    });
    expect(issues.find((i) => i.startsWith("session.dmScope:"))).toBeDefined();
    expect(issues.find((i) => i.startsWith("session.reset.atHour:"))).toBeDefined();
    expect(issues.find((i) => i.startsWith("session.reset.timezone:"))).toMatch(/IANA/);
    expect(issues.find((i) => i.startsWith("agents.list[0].id:"))).toBeDefined();
    expect(issues.find((i) => i.startsWith("tools.sessions.visibility:"))).toBeDefined();
  });

  it("requires a token when the gateway listens beyond loopback", () => {
    expect(issuesOf({ gateway: { host: "0.0.0.0" } })).toEqual([
      "gateway.auth.token: required when gateway.host (0.0.0.0) is not loopback",
    ]);
    expect(parseConfig({ gateway: { host: "0.0.0.0", auth: { token: "s3cret-token" } } }).gateway.host).toBe("0.0.0.0");
  });

  // Such tokens passed validation, then every Bearer request was refused (a space ends the
  // credential; Node reads headers as Latin-1): now they fail at start-up, without being shown.
  it("takes only tokens an Authorization: Bearer header can carry: 8+ visible ASCII characters", () => {
    for (const token of ["s3cret-token", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", "A".repeat(200)])
      expect(parseConfig({ gateway: { auth: { token } } }).gateway.auth.token).toBe(token);
    for (const token of ["has space-123", "tab\tseparated", "tökén-123456", "emoji-🔑-token", "new\nline-token"]) {
      const issues = issuesOf({ gateway: { auth: { token } } });
      expect(issues).toEqual([expect.stringMatching(/^gateway\.auth\.token: use only visible ASCII characters/)]);
      expect(issues.join("\n")).not.toContain(token);
    }
  });

  it("--token (loadConfig's token) sets gateway.auth.token over SWITCHBOARD_TOKEN and the file, checked alike", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cfg-"));
    const file = join(dir, "open.json5");
    writeFileSync(file, `{ gateway: { host: "0.0.0.0", auth: { token: "from-the-file" } } }`);
    const env = { SWITCHBOARD_STATE_DIR: dir, SWITCHBOARD_TOKEN: "from-the-env-1" };
    expect(loadConfig({ file, env, token: "from-the-flag" }).config.gateway.auth.token).toBe("from-the-flag");
    expect(loadConfig({ file, env }).config.gateway.auth.token).toBe("from-the-env-1");
    // It satisfies the token a non-loopback host requires.
    writeFileSync(file, `{ gateway: { host: "0.0.0.0" } }`);
    expect(loadConfig({ file, env: {}, token: "from-the-flag" }).config.gateway.auth.token).toBe("from-the-flag");
    // A bad one is blamed on --token, hidden.
    const issues = (token: string, e: NodeJS.ProcessEnv = {}) => {
      try {
        loadConfig({ file, env: e, token });
      } catch (err) {
        return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
      }
      return [];
    };
    expect(issues("bad token 123", { SWITCHBOARD_TOKEN: "fine-env-token" })).toEqual([
      expect.stringMatching(/^--token: use only visible ASCII .*\(got \(hidden\); it sets gateway\.auth\.token\)$/),
    ]);
    expect(issues("short")).toEqual(["--token: use at least 8 characters (got (hidden); it sets gateway.auth.token)"]);
  });

  it("reports the cross-field checks together with field errors, each once", () => {
    const issues = issuesOf({
      foo: 1,
      session: { dmScope: "x", reset: { mode: "weekly" } },
      gateway: { host: "0.0.0.0", limits: { messageBytes: 4096, bodyBytes: 2048 } },
      agents: { list: [{ id: "Bad" }, { id: "a" }, { id: "a" }] },
    });
    expect(issues.find((i) => i.startsWith("session.dmScope:"))).toBeDefined();
    expect(issues.find((i) => i.startsWith("session.reset.mode:"))).toBeDefined();
    expect(issues.find((i) => i.startsWith("agents.list[0].id:"))).toBeDefined();
    expect(issues).toContain("foo: unknown key");
    expect(issues).toContain("gateway.auth.token: required when gateway.host (0.0.0.0) is not loopback");
    expect(issues).toContain("gateway.limits.bodyBytes: must be at least messageBytes (4096)");
    expect(issues).toContain('agents.list[2].id: duplicate agent id "a"');
    const paths = issues.map((i) => i.slice(0, i.indexOf(": ")));
    expect(paths).toEqual([...new Set(paths)]);
    // Only an unknown key: zod runs the superRefine itself; still one token issue.
    expect(issuesOf({ foo: 1, gateway: { host: "0.0.0.0" } })).toEqual([
      "foo: unknown key",
      "gateway.auth.token: required when gateway.host (0.0.0.0) is not loopback",
    ]);
    // A check whose inputs are themselves invalid is not made; a too-short token is reported once.
    expect(
      issuesOf({ gateway: { host: "0.0.0.0", auth: { token: "" }, limits: { messageBytes: "big", bodyBytes: 2048 } } }),
    ).toEqual([
      expect.stringMatching(/^gateway\.auth\.token: use at least 8 characters/),
      expect.stringMatching(/^gateway\.limits\.messageBytes: /),
    ]);
  });

  it("a bad record key says what is wrong with it, in the key schema's own words", () => {
    expect(issuesOf({ channels: { "Bad Id": { kind: "log" } } })).toEqual([
      "channels.Bad Id: not a valid key: a channel id is 1-64 lowercase letters, digits, _ and - " +
        "(starting with a letter or digit)",
    ]);
    expect(issuesOf({ agents: { defaults: { models: { "": {} } } } })).toEqual([
      'agents.defaults.models.: not a valid key: a model is named "provider/model", not empty',
    ]);
  });

  it("a value no option of a union takes says what the options accept and what it got", () => {
    expect(issuesOf({ agents: { defaults: { model: 5 } } })).toEqual([
      "agents.defaults.model: expected a string or an object (got 5)",
    ]);
    expect(issuesOf({ commands: { native: "yes" } })).toEqual([
      'commands.native: expected true or false or "auto" (got a string)',
    ]);
    // A value of the kind one option takes gets that option's own message.
    expect(issuesOf({ session: { maintenance: { rotateBytes: "lots" } } })).toEqual([
      'session.maintenance.rotateBytes: not a size: "lots" (use e.g. "10mb", "512kb")',
    ]);
    expect(issuesOf({ session: { maintenance: { rotateBytes: -1 } } })).toEqual([
      expect.stringMatching(/^session\.maintenance\.rotateBytes: Too small: expected number to be >=0/),
    ]);
  });

  it("rejects duplicate agent ids and out-of-range ping-pong", () => {
    const issues = issuesOf({
      agents: { list: [{ id: "a" }, { id: "a" }] },
      session: { agentToAgent: { maxPingPongTurns: 6 } },
    });
    expect(issues).toContain('agents.list[1].id: duplicate agent id "a"');
    expect(issues.find((i) => i.startsWith("session.agentToAgent.maxPingPongTurns:"))).toBeDefined();
  });
});

describe("loadConfig", () => {
  it("reads JSON5 and applies env overrides before validating", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cfg-"));
    const file = join(dir, "sb.json5");
    writeFileSync(file, `{ // comments are fine\n session: { dmScope: 'per-peer' }, gateway: { port: 9000, }, }`);
    const { config, redisExplicit, path } = loadConfig({
      file,
      env: {
        REDIS_URL: "redis://127.0.0.1:6390",
        SWITCHBOARD_PORT: "9100",
        SWITCHBOARD_STATE_DIR: dir,
        SWITCHBOARD_TOKEN: "tok-12345678",
      },
    });
    expect(path).toBe(file);
    expect(redisExplicit).toBe(true);
    expect(config.redis.url).toBe("redis://127.0.0.1:6390");
    expect(config.gateway.port).toBe(9100);
    expect(config.gateway.auth.token).toBe("tok-12345678");
    expect(config.storage.dir).toBe(dir);
    expect(config.session.dmScope).toBe("per-peer");
  });

  it("reports JSON5 syntax errors with a line", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cfg-"));
    const file = join(dir, "bad.json5");
    writeFileSync(file, "{ session: { dmScope: 'main' \n");
    expect(() => loadConfig({ file, env: {} })).toThrow(/JSON5 syntax/);
  });

  it("a missing explicit file is an error, a missing default file means defaults", () => {
    expect(() => loadConfig({ file: "/nonexistent/sb.json5", env: {} })).toThrow(ConfigError);
    const { config, redisExplicit } = loadConfig({ env: { SWITCHBOARD_CONFIG: "", HOME: "/nonexistent-home" } });
    expect(redisExplicit).toBe(false);
    expect(config.gateway.port).toBe(7420);
  });

  it("resolves a relative storage.dir against the config file's directory, not the working directory", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cfg-"));
    const file = join(dir, "sub", "rel.json5");
    mkdirSync(join(dir, "sub"));
    writeFileSync(file, `{ storage: { dir: "./state" } }`);
    const cwd = process.cwd();
    try {
      // The same file read from two working directories names one state dir.
      // (--config given relative to the working directory, then absolute from elsewhere).
      for (const [from, given] of [
        [dir, join("sub", "rel.json5")],
        [tmpdir(), file],
      ] as const) {
        process.chdir(from);
        expect(loadConfig({ file: given, env: {} }).config.storage.dir).toBe(join(dir, "sub", "state"));
      }
      writeFileSync(file, `{ storage: { dir: "../up" } }`);
      expect(loadConfig({ file, env: {} }).config.storage.dir).toBe(join(dir, "up"));
      // Absolute and ~/ paths are kept as they are.
      writeFileSync(file, `{ storage: { dir: "~/sb-state" } }`);
      expect(loadConfig({ file, env: {} }).config.storage.dir).toBe(join(homedir(), "sb-state"));
    } finally {
      process.chdir(cwd);
    }
  });

  it("refuses a relative SWITCHBOARD_STATE_DIR, which has no file to be relative to", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cfg-"));
    const file = join(dir, "sb.json5");
    writeFileSync(file, `{ storage: { dir: "./state" } }`);
    try {
      loadConfig({ file, env: { SWITCHBOARD_STATE_DIR: "state" } });
      expect.unreachable("a relative SWITCHBOARD_STATE_DIR must be refused");
    } catch (err) {
      expect((err as ConfigError).issues).toEqual([
        {
          path: "SWITCHBOARD_STATE_DIR",
          message: 'must be an absolute path or start with ~/ (got "state"; it sets storage.dir)',
        },
      ]);
    }
    expect(loadConfig({ file, env: { SWITCHBOARD_STATE_DIR: "~/x" } }).config.storage.dir).toBe(join(homedir(), "x"));
  });
});
