/**
 * Strict Authorization parsing over HTTP (src/auth/credentials.ts), the start-up log line of a
 * real `switchboard gateway` process printing the address it actually bound and whether it asks
 * for a token, and `--token` of `start` / `gateway` / `worker`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { presentedToken } from "../../src/auth/credentials.js";
import { formatBoundAddresses } from "../../src/gateway/bound-addresses.js";
import { testRedisUrl, uniquePrefix } from "../helpers/context.js";
import { cliEnv, runCli, show } from "../helpers/cli-run.js";
import { spawnSwitchboard, startTestSystem, writeConfigFile, type TestSystem } from "../helpers/system.js";

const TOKEN = "s3cret-token-for-auth-tests";
const b64 = (s: string) => Buffer.from(s).toString("base64");

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({ gateway: { auth: { token: TOKEN } } }, { gateway: true, workers: false });
});

afterAll(async () => {
  await sys?.close();
});

/**
 * GET with a raw Authorization header, sent as given: fetch() would normalise or refuse some of
 * the odd values (tabs, trailing spaces) before they reach the server.
 */
function getWithAuth(path: string, authorization: string | undefined): Promise<number> {
  const url = new URL(sys.url + path);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: "GET",
        headers: authorization === undefined ? {} : { authorization },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("Authorization header over HTTP", () => {
  it.each<[label: string, header: string]>([
    ["Bearer", `Bearer ${TOKEN}`],
    ["scheme in lower case", `bearer ${TOKEN}`],
    ["scheme in upper case", `BEARER ${TOKEN}`],
    ["several spaces after the scheme (1*SP is allowed)", `Bearer   ${TOKEN}`],
    ["trailing spaces (optional whitespace around a header value)", `Bearer ${TOKEN}  `],
    ["Basic user:token", `Basic ${b64(`admin:${TOKEN}`)}`],
    ["Basic with an empty user", `Basic ${b64(`:${TOKEN}`)}`],
    ["basic scheme in lower case", `basic ${b64(`ops:${TOKEN}`)}`],
  ])("accepts %s", async (_label, header) => {
    expect(await getWithAuth("/v1/deliveries", header)).toBe(200);
  });

  it.each<[label: string, header: string | undefined]>([
    ["no header", undefined],
    ["Bearer <token> extra", `Bearer ${TOKEN} extra`],
    ["Bearer <token> <token>", `Bearer ${TOKEN} ${TOKEN}`],
    ["a tab instead of a space", `Bearer\t${TOKEN}`],
    ["no space at all", `Bearer${TOKEN}`],
    ["the bare token", TOKEN],
    ["Bearer with no credential", "Bearer"],
    ["Bearer and spaces", "Bearer    "],
    ["the token in the wrong case", `Bearer ${TOKEN.toUpperCase()}`],
    ["a prefix of the token", `Bearer ${TOKEN.slice(0, -1)}`],
    ["the token with a suffix", `Bearer ${TOKEN}x`],
    ["Basic without the user: part", `Basic ${b64(TOKEN)}`],
    ["Basic with the wrong password", `Basic ${b64("admin:wrong")}`],
    ["Basic with the token as user", `Basic ${b64(`${TOKEN}:`)}`],
    ["Basic that is not base64", `Basic admin:${TOKEN}`],
    ["Basic base64 without its padding", `Basic ${b64(`a:${TOKEN}`).replace(/=+$/, "")}`],
    ["Basic <cred> extra", `Basic ${b64(`admin:${TOKEN}`)} extra`],
    ["another scheme", `Token ${TOKEN}`],
    ["a comma-joined second credential", `Bearer ${TOKEN}, Basic ${b64(`a:${TOKEN}`)}`],
  ])("refuses %s with 401", async (_label, header) => {
    expect(await getWithAuth("/v1/deliveries", header)).toBe(401);
  });

  it("keeps the probes open and protects every other route", async () => {
    expect(await getWithAuth("/healthz", undefined)).toBe(200);
    expect(await getWithAuth("/readyz", undefined)).toBe(200);
    expect(await getWithAuth("/v1/runs/x", `Bearer ${TOKEN} extra`)).toBe(401);
    expect(await getWithAuth("/metrics", `Basic ${b64(TOKEN)}`)).toBe(401);
    expect(await getWithAuth("/admin/queues", `Basic ${b64(TOKEN)}`)).toBe(401);
  });
});

describe("presentedToken", () => {
  it("needs base64 padding (the unpadded case above really is unpadded)", () => {
    expect(b64(`a:${TOKEN}`)).toMatch(/=$/);
  });

  it("returns the password of a Basic credential even when it contains colons", () => {
    expect(presentedToken(`Basic ${b64("u:a:b")}`)).toBe("a:b");
  });
  it("is undefined for anything malformed", () => {
    for (const h of [
      undefined,
      "",
      " ",
      "Bearer",
      `Bearer a b`,
      `Basic ${b64("nocolon")}`,
      "Basic %%%%",
      "Bearer tökén",
    ])
      expect(presentedToken(h)).toBeUndefined();
  });
});

describe("start-up log", () => {
  it("formats IPv4, IPv6 and socket addresses", () => {
    expect(formatBoundAddresses([{ address: "0.0.0.0", family: "IPv4", port: 8787 }])).toBe("0.0.0.0:8787");
    expect(
      formatBoundAddresses([
        { address: "::1", family: "IPv6", port: 1 },
        { address: "127.0.0.1", family: "IPv4", port: 1 },
      ]),
    ).toBe("[::1]:1, 127.0.0.1:1");
    expect(formatBoundAddresses(["/tmp/sb.sock"])).toBe("/tmp/sb.sock");
  });

  it("a gateway started on 0.0.0.0 port 0 prints the wildcard address and the real port, which answers", async () => {
    const config = sys.config;
    const file = writeConfigFile({
      ...structuredClone(config),
      redis: { ...config.redis, url: testRedisUrl(), prefix: uniquePrefix("auth") },
      gateway: { ...config.gateway, host: "0.0.0.0", port: 0, auth: { token: TOKEN } },
    });
    const child = await spawnSwitchboard(["gateway", "--config", file]);
    try {
      const line = child
        .output()
        .split("\n")
        .find((l) => l.startsWith("switchboard gateway ready:"));
      expect(line, child.output()).toBeDefined();
      expect(line).toMatch(/, auth: bearer token required$/);
      const m = /listening on 0\.0\.0\.0:(\d+) at http:\/\/127\.0\.0\.1:(\d+)/.exec(line!);
      expect(m, line).not.toBeNull();
      const port = Number(m![1]);
      expect(port).toBeGreaterThan(0);
      expect(Number(m![2])).toBe(port);
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
    } finally {
      await child.stop();
    }
  });
});

describe("--token of the long-running commands", () => {
  /** A config of this deployment's Redis without any token, with `gateway` settings. */
  const tokenless = (gateway: Record<string, unknown>) => {
    const config = sys.config;
    return writeConfigFile({
      ...structuredClone(config),
      redis: { ...config.redis, url: testRedisUrl(), prefix: uniquePrefix("tok") },
      gateway: { ...config.gateway, port: 0, ...gateway, auth: {} },
    });
  };
  const readyLine = (out: string, role: string) =>
    out.split("\n").find((l) => l.startsWith(`switchboard ${role} ready:`));
  const status = async (base: string, headers: Record<string, string> = {}) =>
    (
      await fetch(`${base}/v1/rpc/status`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: "{}",
      })
    ).status;

  // It was ignored: the gateway ran without a token, open to anyone on the host (or, on 0.0.0.0, refused to start).
  it("gateway --token is the token it asks for, also on 0.0.0.0 with no token in the file", async () => {
    const file = tokenless({ host: "0.0.0.0" });
    const child = await spawnSwitchboard(["gateway", "--config", file, "--token", TOKEN]);
    try {
      const line = readyLine(child.output(), "gateway");
      expect(line, child.output()).toMatch(/, auth: bearer token required$/);
      const base = `http://127.0.0.1:${/listening on 0\.0\.0\.0:(\d+)/.exec(line!)![1]}`;
      expect(await status(base)).toBe(401);
      expect(await status(base, { authorization: "Bearer wrong-token-123" })).toBe(401);
      expect(await status(base, { authorization: `Bearer ${TOKEN}` })).toBe(200);
      expect(child.output()).not.toContain(TOKEN);
    } finally {
      await child.stop();
    }
  });

  it("start without any token says so: auth none, local-only", async () => {
    const child = await spawnSwitchboard(["start", "--config", tokenless({ host: "127.0.0.1" })]);
    try {
      const line = readyLine(child.output(), "start");
      expect(line, child.output()).toMatch(/, auth: none, local-only \(no token: anyone on this host can call it/);
      expect(await status(/ at (http:\/\/\S+) /.exec(line!)![1]!)).toBe(200);
    } finally {
      await child.stop();
    }
  });

  it("a --token no Bearer header can carry is refused under --token, never echoed; SWITCHBOARD_TOKEN too", async () => {
    const file = tokenless({ host: "127.0.0.1" });
    for (const bad of ["has space 12345", "tökén-1234567", "tab\tseparated"]) {
      const flag = await runCli(["start", "--config", file, "--token", bad], cliEnv({}));
      expect(flag.code, show(flag)).toBe(64); // a bad flag value: usage, as for mcp
      expect(flag.stderr).toMatch(
        /--token: use only visible ASCII characters .*\(got \(hidden\); it sets gateway\.auth\.token\)/,
      );
      const env = await runCli(["config", "validate", file], cliEnv({ SWITCHBOARD_TOKEN: bad }));
      expect(env.code, show(env)).toBe(1);
      expect(env.stderr).toMatch(/^SWITCHBOARD_TOKEN: use only visible ASCII characters .*\(got \(hidden\)/);
      for (const r of [flag, env]) expect(r.stdout + r.stderr).not.toContain(bad);
    }
    const short = await runCli(["gateway", "--config", file, "--token", "short"], cliEnv({}));
    expect(short.code, show(short)).toBe(64);
    expect(short.stderr, show(short)).toMatch(/--token: use at least 8 characters/);
    // `mcp` serves with the token it is given too: the same rule, not only the length.
    const accented = "tökén-1234567";
    const mcp = await runCli(
      ["mcp", "--session", "agent:main:main", "--config", file, "--token", accented],
      cliEnv({}),
    );
    expect(mcp.code, show(mcp)).toBe(64); // mcp checks its flags itself: a usage error
    expect(mcp.stderr).toMatch(/--token: use only visible ASCII characters/);
    expect(mcp.stdout + mcp.stderr).not.toContain(accented);
  });

  it("worker --token: validated like the gateway's, and said to change nothing there", async () => {
    const file = tokenless({ host: "127.0.0.1" });
    // A bad --queues stops it right after the start-up notices, before Redis is asked.
    const r = await runCli(["worker", "--config", file, "--token", TOKEN, "--queues", "bogus"], cliEnv({}));
    expect(r.code, show(r)).toBe(64);
    expect(r.stderr).toContain("warning: --token has no effect on a worker: it serves no gateway");
    const bad = await runCli(["worker", "--config", file, "--token", "bad token 123"], cliEnv({}));
    expect(bad.stderr, show(bad)).toMatch(/--token: use only visible ASCII/);
  });
});
