/**
 * MCP over HTTP keeps a server per session until the client ends it with DELETE; clients that
 * never do are closed after an idle time, and the number open at once is capped (the one unused
 * longest goes first), so a long-running `switchboard mcp --http` cannot grow without bound.
 * A body over the configured body limit is a 413 `payload_too_large`, as at the gateway.
 */
import { afterEach, describe, expect, it } from "vitest";
import pino from "pino";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { request } from "node:http";
import { serveHttp, type RunningTransport } from "../../src/mcp/transports.js";
import { pace } from "../helpers/settle.js";

let running: RunningTransport | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };

async function initialize(url: string): Promise<string> {
  const res = await fetch(url, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get("mcp-session-id")!;
}

async function ping(url: string, id: string): Promise<number> {
  const res = await fetch(url, {
    method: "POST",
    headers: { ...headers, "mcp-session-id": id },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
  });
  await res.text();
  return res.status;
}

const LIMITS = { bodyBytes: 2048, messageBytes: 1024 };

async function serve(opts: { idleMs?: number; maxSessions?: number }): Promise<string> {
  running = await serveHttp(async () => new McpServer({ name: "t", version: "1" }), {
    host: "127.0.0.1",
    port: 0,
    log: pino({ level: "silent" }),
    limits: LIMITS,
    ...opts,
  });
  return running.describe;
}

describe("MCP HTTP sessions", () => {
  it("beyond the cap, the session unused longest is closed", async () => {
    const url = await serve({ maxSessions: 2 });
    const a = await initialize(url);
    const b = await initialize(url);
    expect(await ping(url, a)).toBe(200); // a is now the most recently used
    const c = await initialize(url);
    expect(await ping(url, b)).toBe(404);
    expect(await ping(url, a)).toBe(200);
    expect(await ping(url, c)).toBe(200);
  });

  it("a session idle past the idle time is closed", async () => {
    const url = await serve({ idleMs: 200 });
    const a = await initialize(url);
    expect(await ping(url, a)).toBe(200);
    // Unused for over three idle times (each request would count as use).
    await pace(700, "the session left idle past its idle time and one sweep");
    expect(await ping(url, a)).toBe(404);
  });

  it("a body over the configured body limit is a 413 payload_too_large, declared or streamed", async () => {
    const url = await serve({});
    const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { pad: "x".repeat(3000) } });
    const declared = await fetch(url, { method: "POST", headers, body: big });
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { error: unknown }).error).toMatchObject({
      code: -32600,
      message: expect.stringContaining("the body limit is 2048 bytes"),
      data: { code: "payload_too_large", limitBytes: 1024, bodyLimitBytes: 2048 },
    });
    // Chunked, 4 MiB, no Content-Length: the answer arrives while the client is still sending
    // (the rest is read and dropped), not a reset connection.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(url, { method: "POST", headers }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      const chunk = "x".repeat(64 * 1024);
      let sent = 0;
      const write = () => {
        while (sent < 64) {
          sent++;
          if (!req.write(chunk)) return void req.once("drain", write);
        }
        req.end();
      };
      write();
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body).error.data.code).toBe("payload_too_large");
    // The server still answers within the limit.
    expect(
      (await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) }))
        .status,
    ).toBe(400);
  });
});
