/**
 * The CLI against a gateway, as real processes on a private redis-server:
 * - `status --url` reports the deployment the gateway serves (its `status` RPC method), not the
 *   one the local config or $REDIS_URL names;
 * - a token the gateway refuses is said by `status` and `doctor` (its /readyz needs no token);
 * - `doctor` checks the gateway the CLI would use: where the config says one listens, when
 *   nothing else names one;
 * - `history --limit` is validated by name.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { tempDir, uniquePrefix } from "../helpers/context.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "../helpers/redis-server.js";
import { spawnSwitchboard, type ChildHandle } from "../helpers/system.js";

const TOKEN = "gateway-token-0123456789";
const dir = tempDir("sb-gw-status");
const prefix = uniquePrefix("gws");
let redis: PrivateRedis;
let gateway: ChildHandle;
let base: string;
let cfg: string;
/** Where the operator's shell points: another Redis (nothing listens there) and no config. */
let elsewhere: NodeJS.ProcessEnv;
/** The deployment's own config. */
let own: NodeJS.ProcessEnv;

beforeAll(async () => {
  redis = await startPrivateRedis();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  cfg = join(dir.dir, "switchboard.json5");
  const state = join(dir.dir, "state");
  writeFileSync(
    cfg,
    JSON.stringify({
      redis: { url: redis.url, prefix },
      storage: { dir: state },
      gateway: { port, auth: { token: TOKEN } },
    }),
  );
  own = cliEnv({ HOME: dir.dir, SWITCHBOARD_STATE_DIR: state });
  elsewhere = cliEnv({
    HOME: dir.dir,
    SWITCHBOARD_STATE_DIR: join(dir.dir, "other"),
    REDIS_URL: "redis://127.0.0.1:1",
  });
  // `gateway`, not `start`: no runtime file names it, only the config's host and port do.
  gateway = await spawnSwitchboard(["gateway", "--config", cfg], own as Record<string, string>);
  const queued = await runCli(
    [
      "call",
      "agent",
      "--params",
      JSON.stringify({ sessionKey: "main", message: "hi" }),
      "--url",
      base,
      "--token",
      TOKEN,
    ],
    elsewhere,
  );
  expect(queued.code, show(queued)).toBe(0);
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await redis?.cleanup();
  dir.cleanup();
}, 30_000);

interface StatusJson {
  gateway: { url: string | null; reachable: boolean; tokenRefused?: boolean };
  redis?: { url: string; prefix: string; up: boolean };
  workers?: number;
  sessions?: { key: string }[];
  processes?: { role: string; pid: number }[];
  [k: string]: unknown;
}

describe("status through a gateway", () => {
  it("reports the gateway's deployment, not the local $REDIS_URL", async () => {
    const r = await runCli(["status", "--url", base, "--token", TOKEN], elsewhere);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toContain(`Gateway: up at ${base}\n`);
    expect(r.stdout).toMatch(new RegExp(`^Redis: {3}up \\(${redis.url.replace(/[/.]/g, "\\$&")}, \\d+ ms\\)$`, "m"));
    expect(r.stdout).toMatch(/^recent session +updated *$/m);
    expect(r.stdout).toContain("agent:main:main");
    expect(r.stdout).not.toContain("127.0.0.1:1");
  });

  it("--json: the same object as status in direct mode, plus the gateway", async () => {
    const viaGateway = JSON.parse(
      (await runCli(["status", "--json", "--url", base, "--token", TOKEN], elsewhere)).stdout,
    ) as StatusJson;
    // Direct: the deployment's config, with the gateway port moved to where none listens.
    const closed = await freePort();
    const d = await runCli(["status", "--json", "--config", cfg], { ...own, SWITCHBOARD_PORT: String(closed) });
    expect(d.code, show(d)).toBe(0);
    const direct = JSON.parse(d.stdout) as StatusJson;
    expect(direct.gateway.reachable).toBe(false);
    expect(viaGateway.gateway).toEqual({ url: base, reachable: true });
    expect(Object.keys(viaGateway)).toEqual(Object.keys(direct));
    expect(viaGateway.redis).toMatchObject({ url: redis.url, prefix, up: true });
    expect(direct.redis).toMatchObject({ url: redis.url, prefix, up: true });
    for (const k of ["queues", "ready", "workers", "storage", "deadLetters"])
      expect(viaGateway[k], k).toEqual(direct[k]);
    expect(viaGateway.sessions?.map((s) => s.key)).toEqual(direct.sessions?.map((s) => s.key));
    expect(viaGateway.processes?.map((p) => [p.role, p.pid])).toEqual([["gateway", gateway.child.pid]]);
  });

  it("`status` is a gateway RPC method (call, call --list)", async () => {
    const r = await runCli(["call", "status", "--url", base, "--token", TOKEN], elsewhere);
    expect(r.code, show(r)).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ redis: { url: redis.url, prefix, up: true } });
    const list = await runCli(["call", "--list"], elsewhere);
    expect(list.stdout).toMatch(/^status +The deployment this gateway serves/m);
  });
});

describe("a token the gateway refuses", () => {
  it("status: the gateway is up but refused the token, what to set; exit 1", async () => {
    const r = await runCli(["status", "--url", base, "--token", "wrong-token-0123456789"], elsewhere);
    expect(r.code, show(r)).toBe(1);
    expect(r.stdout).toBe(
      `Gateway: up at ${base}\n         token refused → set --token / SWITCHBOARD_TOKEN / gateway.auth.token\n`,
    );
  });

  it("doctor: FAIL gateway, token refused and what to set; exit 1", async () => {
    const r = await runCli(["doctor", "--config", cfg, "--token", "wrong-token-0123456789"], own);
    expect(r.code, show(r)).toBe(1);
    expect(r.stdout).toContain(`FAIL  gateway    ${base} is ready but refused the token (401)\n`);
    expect(r.stdout).toContain("→ token refused → set --token / SWITCHBOARD_TOKEN / gateway.auth.token");
  });
});

describe("doctor checks the gateway the CLI would use", () => {
  it("with no --url and no runtime file: the config's host and port; the right token is ok", async () => {
    const r = await runCli(["doctor", "--config", cfg], own);
    // No worker runs: unhealthy for that, but the gateway itself is fine.
    expect(r.stdout, show(r)).toContain(`ok    gateway    ${base} ready\n`);
  });

  it("none answering there is a warning naming where it looked", async () => {
    const closed = await freePort();
    const r = await runCli(["doctor", "--config", cfg], { ...own, SWITCHBOARD_PORT: String(closed) });
    expect(r.stdout, show(r)).toContain(
      `warn  gateway    no gateway answers at http://127.0.0.1:${closed} (gateway.host/port; ECONNREFUSED)`,
    );
  });
});

describe("history --limit", () => {
  it("a value that is not a whole number from 1 to 1000 is refused by name, before connecting", async () => {
    for (const [bad, says] of [
      ["abc", "a whole number ≥ 1"],
      ["0", "a whole number ≥ 1"],
      ["1001", "a whole number from 1 to 1000"],
    ]) {
      const r = await runCli(["history", "main", "--limit", bad!, "--url", "http://127.0.0.1:1"], elsewhere);
      expect(r.code, show(r)).toBe(64);
      expect(r.stderr).toBe(`error [invalid_request]: --limit must be ${says} (got "${bad}")\n`);
    }
  });
});
