/**
 * A client that goes away while a door waits for a run: the wait ends at once (its timer, its
 * place on the run-done subscription and its Redis reads are let go) instead of when the run
 * ends, and the run itself still finishes. For every door that waits: the OpenAI door (plain and
 * streaming), `POST /tools/invoke` sessions_send, `POST /v1/tools/<name>` sessions_send, and MCP
 * over HTTP (the connection dropped, no `notifications/cancelled`). A complete answer is not taken
 * for a disconnect.
 */
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { doorRunId } from "../../src/gateway/openai-door/run-turn.js";
import { createSessionMcpServer } from "../../src/mcp/server.js";
import { serveHttp, type RunningTransport } from "../../src/mcp/transports.js";
import { ensureSession } from "../../src/storage/ensure-session.js";
import { createToolRuntime } from "../../src/tools/tool-runtime.js";
import { history, runOk } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptAgent, toolsConfig } from "../fixtures/tools-support.js";

const TOKEN = "doors-disconnect-token-01";
const MAIN = "agent:main:main";
const BOB = "agent:bob:main";
/** Long enough that a wait still held after the client left is seen, short enough to finish in the test. */
const SLOW_MS = 4000;

let sys: TestSystem;
let mcp: RunningTransport;
const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      gateway: { auth: { token: TOKEN } },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "bob"] } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
      agents: {
        list: [
          scriptAgent(
            "main",
            [
              { when: { contains: "slow" }, delayMs: SLOW_MS, reply: "main slow: {{text}}" },
              { reply: "main: {{text}}" },
            ],
            { default: true },
          ),
          scriptAgent("bob", [
            { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
            { when: { contains: "slow" }, delayMs: SLOW_MS, reply: "bob: {{text}}" },
            { reply: "bob: {{text}}" },
          ]),
        ],
      },
    }),
  );
  for (const key of [MAIN, BOB]) await ensureSession(sys.svc, key);
  const tools = createToolRuntime(sys.svc);
  const log = pino({ level: "silent" });
  mcp = await serveHttp(() => createSessionMcpServer({ svc: sys.svc, tools, sessionKey: MAIN, version: "test", log }), {
    host: "127.0.0.1",
    port: 0,
    log,
    limits: { bodyBytes: 1 << 20, messageBytes: 1 << 19 },
  });
}, 60_000);

afterAll(async () => {
  await mcp?.close();
  await sys?.close();
});

const waiter = () => sys.svc.waiter();

/** Until the door waits, then the client leaves; the wait must be gone well before the run ends. */
async function leaveWhileWaiting(stop: AbortController, what: string): Promise<void> {
  await settle(() => waiter().pendingWaits === 1, { what: `${what} waiting for the run` });
  const leftAt = performance.now();
  stop.abort();
  await settle(() => waiter().pendingWaits === 0, { what: `${what}: the wait released`, timeoutMs: 3000, stepMs: 5 });
  expect(performance.now() - leftAt, what).toBeLessThan(1500);
}

describe("a client that goes away while a door waits", () => {
  it("OpenAI door, stream false: the wait ends, the run finishes", async () => {
    expect(waiter().pendingWaits).toBe(0);
    const stop = new AbortController();
    const idem = "plain-gone-1";
    const request = fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      signal: stop.signal,
      headers: { ...auth, "idempotency-key": idem },
      body: JSON.stringify({ model: "main", user: "gone-plain", messages: [{ role: "user", content: "slow plain" }] }),
    }).catch((e: Error) => e);
    await leaveWhileWaiting(stop, "plain completion");
    expect(await request).toBeInstanceOf(Error);
    const runId = doorRunId("agent:main:openai-user:gone-plain", idem);
    // Released by the client leaving, not by the run's end: the run is still going.
    expect((await sys.svc.runs.get(runId))?.status).toMatch(/^(queued|running)$/);
    expect(await runOk(sys, runId, 15_000)).toMatchObject({ status: "ok", reply: "main slow: slow plain" });
  }, 30_000);

  it("OpenAI door, stream true: the wait ends, the run finishes", async () => {
    const stop = new AbortController();
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      signal: stop.signal,
      headers: auth,
      body: JSON.stringify({ model: "main", stream: true, messages: [{ role: "user", content: "slow stream" }] }),
    });
    const runId = res.headers.get("x-switchboard-run-id")!;
    await res.body!.getReader().read(); // the role delta: the turn is queued
    await leaveWhileWaiting(stop, "streamed completion");
    expect((await sys.svc.runs.get(runId))?.status).toMatch(/^(queued|running)$/);
    expect(await runOk(sys, runId, 15_000)).toMatchObject({ status: "ok", reply: "main slow: slow stream" });
  }, 30_000);

  it("OpenAI door: a client that stays gets its answer (a finished answer is no disconnect)", async () => {
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ model: "main", messages: [{ role: "user", content: "quick" }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]!.message.content).toBe("main: quick");
    expect(waiter().pendingWaits).toBe(0);
  });

  it("POST /tools/invoke sessions_send: the wait ends, the run finishes", async () => {
    const stop = new AbortController();
    const request = fetch(`${sys.url}/tools/invoke`, {
      method: "POST",
      signal: stop.signal,
      headers: auth,
      body: JSON.stringify({
        tool: "sessions_send",
        sessionKey: MAIN,
        args: { sessionKey: BOB, message: "slow invoke", timeoutSeconds: 60 },
      }),
    }).catch((e: Error) => e);
    await leaveWhileWaiting(stop, "tools/invoke");
    expect(await request).toBeInstanceOf(Error);
    await settle(
      async () => (await history(sys, BOB, 50)).some((m) => JSON.stringify(m).includes("bob: slow invoke")),
      { what: "bob's reply to the abandoned sessions_send" },
    );
  }, 30_000);

  it("POST /v1/tools/sessions_send: the wait ends, the run finishes", async () => {
    const stop = new AbortController();
    const request = fetch(`${sys.url}/v1/tools/sessions_send`, {
      method: "POST",
      signal: stop.signal,
      headers: auth,
      body: JSON.stringify({
        sessionKey: MAIN,
        args: { sessionKey: BOB, message: "slow v1 tool", timeoutSeconds: 60 },
      }),
    }).catch((e: Error) => e);
    await leaveWhileWaiting(stop, "/v1/tools");
    expect(await request).toBeInstanceOf(Error);
    await settle(
      async () => (await history(sys, BOB, 50)).some((m) => JSON.stringify(m).includes("bob: slow v1 tool")),
      { what: "bob's reply to the abandoned sessions_send" },
    );
  }, 30_000);

  it("MCP over HTTP: a dropped connection cancels the call; the run finishes", async () => {
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const init = await fetch(mcp.describe, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "dc", version: "1" } },
      }),
    });
    const session = { ...headers, "mcp-session-id": init.headers.get("mcp-session-id")! };
    await init.text();
    await fetch(mcp.describe, {
      method: "POST",
      headers: session,
      body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
    }).then((r) => r.text());
    const stop = new AbortController();
    const request = fetch(mcp.describe, {
      method: "POST",
      signal: stop.signal,
      headers: session,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "sessions_send", arguments: { sessionKey: BOB, message: "slow mcp", timeoutSeconds: 40 } },
      }),
    })
      .then((r) => r.text())
      .catch((e: Error) => e);
    await leaveWhileWaiting(stop, "mcp tools/call");
    expect(await request).toBeInstanceOf(Error);
    await settle(async () => (await history(sys, BOB, 50)).some((m) => JSON.stringify(m).includes("bob: slow mcp")), {
      what: "bob's reply to the dropped MCP call",
    });
    // The MCP session itself goes on: a call on a new connection is answered.
    const again = await fetch(mcp.describe, {
      method: "POST",
      headers: session,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 3,
        method: "tools/call",
        params: { name: "sessions_send", arguments: { sessionKey: BOB, message: "quick", timeoutSeconds: 20 } },
      }),
    });
    expect(await again.text()).toContain("bob: quick");
    expect(waiter().pendingWaits).toBe(0);
  }, 30_000);
});
