/**
 * DNS rebinding (src/auth/local-request.ts): a gateway or `mcp --http` running without a token
 * answers only requests that name a loopback Host and come from no Origin or a loopback one. A
 * page of attacker.example whose name now resolves to 127.0.0.1 sends `Host: attacker.example`
 * and `Origin: http://attacker.example`, and is refused before any route or MCP session is
 * reached. With a token, the token alone decides, as before.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import pino from "pino";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { serveHttp, type RunningTransport } from "../../src/mcp/transports.js";
import { nonLocalRequestReason } from "../../src/auth/local-request.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

const TOKEN = "rebinding-test-token";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw request to 127.0.0.1:<port> with the Host and Origin given (fetch() would not let us set Host). */
function send(
  base: string,
  path: string,
  opts: { method?: string; host?: string; origin?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(base);
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.host !== undefined) headers.host = opts.host;
  if (opts.origin !== undefined) headers.origin = opts.origin;
  if (opts.body !== undefined) headers["content-type"] ??= "application/json";
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method: opts.method ?? "GET", headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

describe("nonLocalRequestReason", () => {
  it.each([
    ["localhost:8787", undefined],
    ["LOCALHOST", undefined],
    ["127.0.0.1", undefined],
    ["127.0.0.1:1", undefined],
    ["[::1]:8787", undefined],
    ["127.0.0.1:8787", "http://localhost:6274"],
    ["127.0.0.1:8787", "https://127.0.0.1"],
    ["[::1]", "http://[::1]:3000"],
  ])("lets Host %s, Origin %s pass", (host, origin) => {
    expect(nonLocalRequestReason({ host, ...(origin ? { origin } : {}) })).toBeUndefined();
  });

  it.each([
    ["attacker.example:8787", undefined],
    ["localhost.attacker.example", undefined],
    ["127.0.0.1.nip.io", undefined],
    ["localhost@attacker.example", undefined],
    ["localhost:8787/x", undefined],
    ["10.0.0.5:8787", undefined],
    ["", undefined],
    [undefined, undefined],
    ["127.0.0.1:8787", "http://attacker.example"],
    ["127.0.0.1:8787", "http://localhost.attacker.example"],
    ["127.0.0.1:8787", "null"],
    ["127.0.0.1:8787", "file://localhost"],
    ["127.0.0.1:8787", "not a url"],
  ])("refuses Host %s, Origin %s", (host, origin) => {
    expect(
      nonLocalRequestReason({ ...(host !== undefined ? { host } : {}), ...(origin ? { origin } : {}) }),
    ).toBeTypeOf("string");
  });
});

describe("gateway without a token", () => {
  let sys: TestSystem;
  let port: string;
  beforeAll(async () => {
    sys = await startTestSystem({ gateway: { openai: { enabled: true } } }, { gateway: true, workers: false });
    expect(sys.config.gateway.auth.token).toBeUndefined();
    port = new URL(sys.url).port;
  });
  afterAll(async () => {
    await sys?.close();
  });

  const rpc = (host: string, origin?: string) =>
    send(sys.url, "/v1/rpc/sessions.list", { method: "POST", host, body: "{}", ...(origin ? { origin } : {}) });

  it("refuses a foreign Host with 403 in the gateway's error shape", async () => {
    const r = await rpc(`attacker.example:${port}`, `http://attacker.example:${port}`);
    expect(r.status).toBe(403);
    const body = JSON.parse(r.body);
    expect(body.ok).toBe(false);
    expect(body.error.code).toBe("forbidden");
    expect(body.error.message).toMatch(/Host "attacker\.example:\d+" is not a loopback name/);
    expect(r.body).not.toContain("sessions");
  });

  it("refuses a foreign Origin even with a loopback Host", async () => {
    const r = await rpc(`127.0.0.1:${port}`, "http://attacker.example");
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.message).toMatch(/Origin "http:\/\/attacker\.example" is not a loopback origin/);
    expect((await rpc(`127.0.0.1:${port}`, "null")).status).toBe(403);
  });

  it("refuses a foreign Host on every door: Bull Board, the OpenAI door, metrics, docs, unknown routes", async () => {
    const host = `attacker.example:${port}`;
    for (const path of ["/admin/queues", "/v1/models", "/metrics", "/docs", "/v1/deliveries", "/nowhere"])
      expect((await send(sys.url, path, { host })).status, path).toBe(403);
    const chat = await send(sys.url, "/v1/chat/completions", {
      method: "POST",
      host,
      body: JSON.stringify({ model: "main", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(chat.status).toBe(403);
  });

  it("answers loopback names, with the bound port, another port (a tunnel) or none", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "localhost", "127.0.0.1:9000"]) {
      const r = await rpc(host);
      expect(r.status, host).toBe(200);
      expect(JSON.parse(r.body).ok).toBe(true);
    }
    expect((await rpc(`127.0.0.1:${port}`, `http://127.0.0.1:${port}`)).status).toBe(200);
    expect((await rpc(`localhost:${port}`, "http://localhost:6274")).status).toBe(200);
    expect((await send(sys.url, "/v1/models", { host: `127.0.0.1:${port}` })).status).toBe(200);
    expect((await send(sys.url, "/admin/queues", { host: `127.0.0.1:${port}` })).status).toBe(200);
  });

  it("keeps /healthz and /readyz open to probes", async () => {
    expect((await send(sys.url, "/healthz", { host: "localhost" })).status).toBe(200);
    expect((await send(sys.url, "/readyz", { host: "localhost" })).status).toBe(200);
    expect((await send(sys.url, "/healthz", { host: "gateway.internal" })).status).toBe(200);
  });
});

describe("gateway with a token", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem({ gateway: { auth: { token: TOKEN } } }, { gateway: true, workers: false });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("lets the token decide, whatever the Host and Origin", async () => {
    const foreign = { host: "switchboard.example.com", origin: "https://ops.example.com" };
    const ok = await send(sys.url, "/v1/deliveries", { ...foreign, headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect((await send(sys.url, "/v1/deliveries", foreign)).status).toBe(401);
  });
});

describe("mcp --http", () => {
  let running: RunningTransport | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  const serve = async (token?: string) => {
    running = await serveHttp(async () => new McpServer({ name: "t", version: "1" }), {
      host: "127.0.0.1",
      port: 0,
      log: pino({ level: "silent" }),
      limits: { bodyBytes: 1 << 20, messageBytes: 1 << 20 },
      ...(token ? { token } : {}),
    });
    return running.describe;
  };
  const mcpHeaders = { accept: "application/json, text/event-stream" };
  const initialize = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } },
  });
  const post = (url: string, opts: { host?: string; origin?: string; headers?: Record<string, string> }) =>
    send(url, "/mcp", {
      method: "POST",
      body: initialize,
      ...opts,
      headers: { ...mcpHeaders, ...(opts.headers ?? {}) },
    });

  it("without a token, refuses a foreign Host or Origin with 403 and opens no session", async () => {
    const url = await serve();
    const port = new URL(url).port;
    const byHost = await post(url, { host: `attacker.example:${port}`, origin: `http://attacker.example:${port}` });
    expect(byHost.status).toBe(403);
    expect(byHost.headers["mcp-session-id"]).toBeUndefined();
    expect(JSON.parse(byHost.body)).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
    expect(JSON.parse(byHost.body).error.message).toMatch(/not a loopback name/);

    const byOrigin = await post(url, { host: `127.0.0.1:${port}`, origin: "http://attacker.example" });
    expect(byOrigin.status).toBe(403);
    expect(byOrigin.headers["mcp-session-id"]).toBeUndefined();
  });

  it("without a token, a session opened locally cannot be used through a foreign Host", async () => {
    const url = await serve();
    const port = new URL(url).port;
    const local = await post(url, { host: `localhost:${port}`, origin: "http://localhost:6274" });
    expect(local.status).toBe(200);
    const id = local.headers["mcp-session-id"] as string;
    expect(id).toMatch(/^[\w-]+$/); // the session the local client opened
    const ping = (host: string) =>
      send(url, "/mcp", {
        method: "POST",
        host,
        headers: { ...mcpHeaders, "mcp-session-id": id },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
      });
    expect((await ping(`attacker.example:${port}`)).status).toBe(403);
    expect((await ping(`127.0.0.1:${port}`)).status).toBe(200);
  });

  it("with a token, the token decides, whatever the Host and Origin", async () => {
    const url = await serve(TOKEN);
    const foreign = { host: "mcp.example.com", origin: "https://app.example.com" };
    const ok = await post(url, { ...foreign, headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers["mcp-session-id"]).toMatch(/^[\w-]+$/);
    expect((await post(url, foreign)).status).toBe(401);
  });
});
