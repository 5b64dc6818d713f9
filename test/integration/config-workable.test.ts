/**
 * Configs that are valid field by field but cannot work: an openai runtime whose key variable is
 * unset here (warned, with the variable and the agents it breaks), the gateway and metrics server
 * on one port (refused), and a port another program holds (named by its setting at start).
 */
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { loadConfig } from "../../src/config/load.js";
import { startSystem } from "../../src/app/system.js";
import { ConfigError } from "../../src/errors/index.js";
import { tempDir, testConfig } from "../helpers/context.js";

const dir = tempDir("sb-workable");
afterAll(() => dir.cleanup());

const openai = (apiKeyEnv: string) => ({
  kind: "openai",
  baseUrl: "https://api.openai.com/v1",
  model: "gpt-4o-mini",
  apiKeyEnv,
});

function load(input: unknown, env: NodeJS.ProcessEnv) {
  const file = join(dir.dir, `c${Math.random().toString(36).slice(2)}.json5`);
  writeFileSync(file, JSON.stringify(input));
  return loadConfig({ file, env });
}

function issues(input: unknown): string[] {
  try {
    parseConfig(input);
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe("an openai runtime whose apiKeyEnv is unset", () => {
  it("is a warning naming the variable and the agents whose turns would fail", () => {
    const loaded = load(
      {
        agents: {
          defaults: { runtime: openai("NOPE_KEY") },
          list: [
            { id: "main" },
            { id: "ops", runtime: openai("OPS_KEY") },
            { id: "echoer", runtime: { kind: "echo" } },
          ],
        },
      },
      { OPS_KEY: "" },
    );
    expect(loaded.environmentWarnings).toEqual([
      "agents.defaults.runtime.apiKeyEnv: NOPE_KEY is not set in this process's environment; " +
        'turns of agent "main" will fail',
      "agents.list[1].runtime.apiKeyEnv: OPS_KEY is not set in this process's environment; " +
        'turns of agent "ops" will fail',
    ]);
    // The unused-key warnings are a separate list, shown by every process.
    expect(loaded.warnings).toEqual([]);
  });

  it("names the implicit default agent, and is silent once the variable is set", () => {
    const input = { agents: { defaults: { runtime: openai("NOPE_KEY") } } };
    expect(load(input, {}).environmentWarnings).toEqual([
      "agents.defaults.runtime.apiKeyEnv: NOPE_KEY is not set in this process's environment; " +
        'turns of agent "main" will fail',
    ]);
    expect(load(input, { NOPE_KEY: "sk-x" }).environmentWarnings).toEqual([]);
    // No apiKeyEnv at all: the runtime sends no key on purpose (a local server).
    const { apiKeyEnv: _unused, ...keyless } = openai("X");
    expect(load({ agents: { defaults: { runtime: keyless } } }, {}).environmentWarnings).toEqual([]);
  });
});

describe("gateway.port and workers.metricsPort", () => {
  it("may not be the same port on the same address", () => {
    expect(issues({ gateway: { port: 7456 }, workers: { metricsPort: 7456 } })).toEqual([
      "workers.metricsPort: must differ from gateway.port (7456): `start` would listen on it twice",
    ]);
    expect(
      issues({
        gateway: { port: 7456, host: "0.0.0.0", auth: { token: "t".repeat(32) } },
        workers: { metricsPort: 7456 },
      }),
    ).toHaveLength(1);
    // Reported with the other problems when the rest of the config is invalid too.
    expect(issues({ gateway: { port: 7456 }, workers: { metricsPort: 7456, concurrency: -1 } })).toContain(
      "workers.metricsPort: must differ from gateway.port (7456): `start` would listen on it twice",
    );
  });

  it("may be the same when the addresses differ, or both pick a free port (0)", () => {
    expect(issues({ gateway: { port: 0 }, workers: { metricsPort: 0 } })).toEqual([]);
    expect(
      issues({
        gateway: { port: 7456, host: "10.1.2.3", auth: { token: "t".repeat(32) } },
        workers: { metricsPort: 7456, metricsHost: "127.0.0.1" },
      }),
    ).toEqual([]);
  });
});

describe("a port already in use at start", () => {
  async function holdPort(): Promise<{ server: Server; port: number }> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { server, port: (server.address() as { port: number }).port };
  }

  it("names the setting that chose it: gateway.port (SWITCHBOARD_PORT) or workers.metricsPort", async () => {
    const held = await holdPort();
    try {
      await expect(
        startSystem(testConfig({ gateway: { port: held.port } }), { gateway: true, workers: false, logger: false }),
      ).rejects.toThrow(
        `gateway.port ${held.port} (SWITCHBOARD_PORT) is already in use on 127.0.0.1: ` +
          "stop what listens there or choose another port",
      );
      await expect(
        startSystem(testConfig({ workers: { metricsPort: held.port } }), { workers: { queues: ["delivery"] } }),
      ).rejects.toThrow(`workers.metricsPort ${held.port} is already in use on 127.0.0.1`);
    } finally {
      held.server.close();
    }
  });
});
