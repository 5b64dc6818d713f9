/**
 * Config fingerprints (deployment/fingerprint.ts): equal for configs that run the same agents the
 * same way whatever the key order; every difference named from the new process's point of view.
 */
import { describe, expect, it } from "vitest";
import { parseConfig, type ConfigInput } from "../../src/config/index.js";
import { configFingerprint, fingerprintDifferences } from "../../src/deployment/fingerprint.js";
import { sharingSummary } from "../../src/deployment/index.js";
import type { LiveProcess } from "../../src/deployment/process-registry.js";

const fp = (input: ConfigInput) => configFingerprint(parseConfig(input));

describe("configFingerprint", () => {
  it("is the same for the same agents and runtimes, whatever the key order or unrelated settings", () => {
    const a = fp({
      agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "x", delayMs: 5 }] } }] },
      gateway: { port: 1 },
    });
    const b = fp({
      agents: { list: [{ runtime: { rules: [{ delayMs: 5, reply: "x" }], kind: "script" }, id: "main" }] },
      // Housekeeping, places and limits: processes of one deployment may differ in these.
      session: { maintenance: { mode: "enforce", pruneAfter: "30d" } },
      storage: { dir: "/elsewhere" },
      workers: { concurrency: 3, metricsPort: 9100 },
      gateway: { port: 2, limits: { messageBytes: 2048 } },
    });
    expect(a.hash).toBe(b.hash);
    expect(a.agents.main).toEqual({
      kind: "script",
      digest: expect.stringMatching(/^[0-9a-f]{12}$/),
      detail: "1 rule",
    });
  });

  it("changes with an agent, a runtime, a rule, the default agent or the default runtime", () => {
    const base: ConfigInput = { agents: { list: [{ id: "main" }, { id: "helper" }] } };
    const h = fp(base).hash;
    expect(fp({ agents: { list: [{ id: "main" }] } }).hash).not.toBe(h);
    expect(
      fp({ agents: { list: [{ id: "main" }, { id: "helper", runtime: { kind: "script", rules: [] } }] } }).hash,
    ).not.toBe(h);
    expect(fp({ agents: { list: [{ id: "main" }, { id: "helper", default: true }] } }).hash).not.toBe(h);
    expect(fp({ agents: { ...base.agents, defaults: { runtime: { kind: "script", rules: [] } } } }).hash).not.toBe(h);
    // The prefix is recorded but is not part of the hash: it decides *which* deployment, not how.
    const other = fp({ ...base, redis: { prefix: "other" } });
    expect(other.prefix).toBe("other");
    expect(other.hash).toBe(h);
  });

  it("names each difference: runtime, missing and extra agents, default agent", () => {
    const deployment = fp({
      agents: {
        list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "a" }, { reply: "b" }] } }, { id: "ops" }],
      },
    });
    const here = fp({ agents: { list: [{ id: "main" }, { id: "helper", default: true }] } });
    const diffs = fingerprintDifferences(here, deployment);
    expect(diffs).toEqual([
      'default agent: here "helper", deployment "main"',
      'agent "helper": configured here, not in the deployment',
      expect.stringMatching(
        /^agent "main": runtime here echo \[[0-9a-f]{12}\], deployment script \(2 rules\) \[[0-9a-f]{12}\]$/,
      ),
      'agent "ops": in the deployment, missing here',
    ]);
    expect(fingerprintDifferences(deployment, deployment)).toEqual([]);
  });
});

describe("the implicit default agent", () => {
  it("is part of the fingerprint: listing it with the same runtime changes nothing", () => {
    const implicit = fp({});
    const listed = fp({ agents: { list: [{ id: "main" }] } });
    expect(Object.keys(implicit.agents)).toEqual(["main"]);
    expect(listed.hash).toBe(implicit.hash);
    expect(fingerprintDifferences(listed, implicit)).toEqual([]);
  });

  it("is compared by the runtime it really runs, and a difference is named as one", () => {
    const implicit = fp({});
    const scripted = fp({ agents: { list: [{ id: "main", runtime: { kind: "script", rules: [{ reply: "x" }] } }] } });
    expect(scripted.hash).not.toBe(implicit.hash);
    expect(fingerprintDifferences(scripted, implicit)).toEqual([
      expect.stringMatching(
        /^agent "main": runtime here script \(1 rule\) \[[0-9a-f]{12}\], deployment echo \[[0-9a-f]{12}\]$/,
      ),
    ]);
  });
});

describe("behaviour settings", () => {
  const base: ConfigInput = {
    agents: { list: [{ id: "main" }, { id: "ops" }] },
    channels: { ops: { kind: "log" } },
  };
  const changes: [string, ConfigInput][] = [
    ["session.sendPolicy", { session: { sendPolicy: { rules: [{ action: "deny", match: { channel: "ops" } }] } } }],
    ["session.reset", { session: { reset: { mode: "idle", idleMinutes: 30 } } }],
    ["session.dmScope", { session: { dmScope: "per-peer" } }],
    ["tools.profile", { tools: { profile: "minimal" } }],
    ["tools.deny", { tools: { deny: ["sessions_send"] } }],
    ["agents.list[ops].sandboxed", { agents: { list: [{ id: "main" }, { id: "ops", sandboxed: true }] } }],
    [
      "agents.list[ops].subagents",
      { agents: { list: [{ id: "main" }, { id: "ops", subagents: { maxSpawnDepth: 2 } }] } },
    ],
    ["agents.defaults.subagents", { agents: { ...base.agents, defaults: { subagents: { maxSpawnDepth: 2 } } } }],
    ["transcripts.redactSecrets", { transcripts: { redactSecrets: false } }],
    ["channels.ops", { channels: { ops: { kind: "webhook", url: "http://127.0.0.1:9/x" } } }],
    ["channels.extra", { channels: { ops: { kind: "log" }, extra: { kind: "log" } } }],
    ["commands.ownerAllowFrom", { commands: { ownerAllowFrom: ["telegram:1"] } }],
  ];

  it.each(changes)("%s: changes the hash, and is named as the difference", (path, change) => {
    const deployment = fp(base);
    const here = fp({ ...base, ...change });
    expect(here.hash).not.toBe(deployment.hash);
    expect(here.settingsHash).not.toBe(deployment.settingsHash);
    const diffs = fingerprintDifferences(here, deployment);
    expect(diffs).toHaveLength(1);
    expect(diffs[0]).toMatch(
      new RegExp(
        `^${path.replace(/[.[\]]/g, "\\$&")}: ` +
          "(differs \\(here \\[[0-9a-f]{12}\\], deployment \\[[0-9a-f]{12}\\]\\)" +
          "|set here \\[[0-9a-f]{12}\\], not set in the deployment)$",
      ),
    );
  });

  it("a setting only the deployment has is named from this process's point of view", () => {
    const here = fp(base);
    const deployment = fp({ ...base, session: { sendPolicy: { rules: [], default: "deny" } } });
    expect(fingerprintDifferences(here, deployment)).toEqual([
      expect.stringMatching(/^session\.sendPolicy: not set here, set in the deployment \[[0-9a-f]{12}\]$/),
    ]);
  });

  it("a record from a version without settings: its difference is still named", () => {
    const mine = fp(base);
    const { settings: _s, settingsHash: _h, ...old } = fp(base);
    expect(fingerprintDifferences(mine, old)).toEqual([
      "settings: the deployment's process record has none (written by a Switchboard version that did not compare them)",
    ]);
  });
});

describe("sharingSummary", () => {
  const proc = (role: LiveProcess["role"], prefix: string): LiveProcess =>
    ({
      role,
      prefix,
      host: "h",
      pid: 1,
      id: `${role}${prefix}`,
      version: "0",
      forced: false,
      startedAt: 0,
      skewMs: 0,
      heartbeatAt: 0,
      fingerprint: fp({}),
    }) as LiveProcess;

  it("says plainly when nobody else uses the Redis", () => {
    expect(sharingSummary({ prefix: "sb" }, [])).toBe("no other Switchboard process uses it");
  });

  it("counts the others by prefix and role, this deployment first", () => {
    const s = sharingSummary({ prefix: "sb" }, [
      proc("worker", "aa"),
      proc("worker", "sb"),
      proc("gateway", "sb"),
      proc("worker", "sb"),
    ]);
    expect(s).toBe(
      'SHARED with 4 other Switchboard processes: 2 workers, 1 gateway on prefix "sb" (this deployment); ' +
        '1 worker on prefix "aa" (another deployment)',
    );
    expect(sharingSummary({ prefix: "sb" }, [proc("start", "x")])).toBe(
      'SHARED with 1 other Switchboard process: 1 start on prefix "x" (another deployment)',
    );
  });
});
