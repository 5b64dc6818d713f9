/**
 * A client that cancels an MCP tool call (`notifications/cancelled`, sent by the SDK client when its
 * AbortSignal fires or its own request timeout passes) ends the server's wait at once: the
 * sessions_send wait lets go of its place on the run-done subscription and its timer instead of
 * holding them until its timeout. The run is not cancelled: it finishes, and its reply reaches the
 * calling session as a late reply. Real SDK client over the streamable HTTP transport, real workers.
 */
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSessionMcpServer } from "../../src/mcp/server.js";
import { serveHttp, type RunningTransport } from "../../src/mcp/transports.js";
import { ensureSession } from "../../src/storage/ensure-session.js";
import { createToolRuntime } from "../../src/tools/tool-runtime.js";
import { scriptAgent, tool, toolsConfig } from "../fixtures/tools-support.js";
import { settle } from "../helpers/settle.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

const MAIN = "agent:main:main";
const BOB = "agent:bob:main";
/** Bob's turn takes this long: the MCP call is cancelled while it waits. */
const BOB_DELAY_MS = 4000;

let sys: TestSystem;
let mcp: RunningTransport;
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "bob"] } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
      agents: {
        list: [
          scriptAgent("main", [{ reply: "main: {{text}}" }], { default: true }),
          scriptAgent("bob", [
            { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
            { when: { contains: "slow" }, delayMs: BOB_DELAY_MS, reply: "bob: {{text}}" },
            { reply: "bob: {{text}}" },
          ]),
        ],
      },
    }),
  );
  for (const key of [MAIN, BOB]) await ensureSession(sys.svc, key);
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) logLines.push(JSON.parse(line));
      done();
    },
  });
  const log = pino({ level: "info" }, sink);
  const tools = createToolRuntime(sys.svc);
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

describe("a cancelled MCP tool call", () => {
  it("ends the sessions_send wait at once; the run still finishes and its reply reaches the session", async () => {
    const client = new Client({ name: "cancel-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcp.describe)));
    const waiter = sys.svc.waiter();
    try {
      expect(waiter.pendingWaits).toBe(0);
      const stop = new AbortController();
      const call = client.callTool(
        { name: "sessions_send", arguments: { sessionKey: BOB, message: "slow one", timeoutSeconds: 30 } },
        undefined,
        { signal: stop.signal, timeout: 60_000 },
      );
      const outcome = call.then(
        () => "answered",
        (err: Error) => err.message,
      );
      await settle(() => waiter.pendingWaits === 1, { what: "the server waiting for bob's reply" });

      const cancelledAt = performance.now();
      stop.abort("the user pressed stop");
      expect(await outcome).toMatch(/stop/);
      // Released when the cancel arrives, not when the 30 s wait would have timed out.
      await settle(() => waiter.pendingWaits === 0, { what: "the wait released", timeoutMs: 5000, stepMs: 5 });
      const releasedMs = performance.now() - cancelledAt;
      expect(releasedMs).toBeLessThan(1000);

      // The cancelled call's result is not sent (the SDK drops it), so its runId is logged.
      const line = await settle(() => logLines.find((l) => String(l.msg).includes("cancelled by the client")), {
        what: "the cancel logged with the runId",
      });
      expect(line).toMatchObject({ tool: "sessions_send", status: "timeout" });
      const runId = String(line.runId);
      // Released by the cancel, not by the run's finish: bob is still at it.
      expect((await sys.svc.runs.get(runId))?.status).toMatch(/^(queued|running)$/);
      // The run was not cancelled: bob answers.
      expect(await sys.rpc("agent.wait", { runId, timeoutMs: 15_000 })).toMatchObject({
        status: "ok",
        reply: "bob: slow one",
      });
      // Nobody got the reply from the wait, so the flow hands it to the calling session (a late reply).
      await settle(
        async () =>
          JSON.stringify(await tool(sys, "sessions_history", MAIN, { sessionKey: MAIN, limit: 20 })).includes(
            "bob: slow one",
          ),
        { what: "bob's reply in main's transcript as a late reply" },
      );

      // The connection still works, and a call that is not cancelled answers as before.
      const answered = (await client.callTool({
        name: "sessions_send",
        arguments: { sessionKey: BOB, message: "quick", timeoutSeconds: 20 },
      })) as { structuredContent?: Record<string, unknown> };
      expect(answered.structuredContent).toMatchObject({ status: "ok", reply: "bob: quick" });
      expect(waiter.pendingWaits).toBe(0);
    } finally {
      await client.close();
    }
  }, 60_000);
});
