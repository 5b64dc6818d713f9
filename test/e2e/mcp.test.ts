/**
 * `switchboard mcp` end to end with the MCP SDK's own client: the server runs as a real process
 * (dist/src/cli/main.js) over stdio and over streamable HTTP, acting as one session; the workers
 * run in this process on the same config. Every answer is compared with the HTTP tool door
 * (`POST /v1/tools/<name>`) for the same session and arguments.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ORCHESTRATOR_TOOLS } from "../../src/subagents/tool-policy.js";
import { toolJsonSchema } from "../../src/tools/schemas.js";
import { TOOL_NAMES, TOOL_SCHEMAS } from "../../src/tools/tool-runtime.js";
import { chat, scriptAgent, queuesQuiet, tool, toolsConfig } from "../fixtures/tools-support.js";
import {
  CLI,
  ROOT,
  spawnSwitchboard,
  startTestSystem,
  writeConfigFile,
  type ChildHandle,
  type TestSystem,
} from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

const MAIN = "agent:main:main";
const BOB = "agent:bob:main";
const GUEST = "agent:guest:main";
const ORCHESTRATOR = "agent:main:subagent:orch1";
const LEAF = "agent:main:subagent:leaf1";
const TOKEN = "mcp-test-token-0123456789";
/** Every session tool but sessions_yield, which ends a turn and an MCP client is never in one. */
const MCP_TOOLS = TOOL_NAMES.filter((n) => n !== "sessions_yield");
const FORBIDDEN_HISTORY = "Agent-to-agent history denied by tools.agentToAgent.allow.";
const FORBIDDEN_SEND = "Agent-to-agent messaging denied by tools.agentToAgent.allow.";

let sys: TestSystem;
let configFile: string;

/** Environment for the server process: nothing inherited that could point it elsewhere. */
function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !/^(SWITCHBOARD_|REDIS_URL$)/.test(k)) env[k] = v;
  return { ...env, LOG_LEVEL: "warn" };
}

function stdioTransport(sessionKey: string): { transport: StdioClientTransport; stderr: () => string } {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "--session", sessionKey, "--config", configFile],
    env: childEnv(),
    cwd: ROOT,
    stderr: "pipe",
  });
  let err = "";
  transport.stderr!.on("data", (d) => (err += d));
  return { transport, stderr: () => err };
}

async function connected(transport: StdioClientTransport | StreamableHTTPClientTransport): Promise<Client> {
  const client = new Client({ name: "switchboard-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<{ result: CallToolResult; body: any }> {
  const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 30_000 })) as CallToolResult;
  const text = result.content.find((c) => c.type === "text");
  const body = text?.type === "text" ? JSON.parse(text.text) : undefined;
  // The text a model reads and the structured content carry the same object.
  expect(result.structuredContent).toEqual(body);
  return { result, body };
}

/** The checks both transports must pass, as session `agent:main:main`. */
async function sameAsToolDoor(client: Client, tag: string): Promise<void> {
  // sessions_list: identical to the HTTP door once nothing is running.
  await queuesQuiet(sys);
  const listArgs = { messageLimit: 2, includeLastMessage: true };
  const listed = await callTool(client, "sessions_list", listArgs);
  const viaDoor = await tool(sys, "sessions_list", MAIN, listArgs);
  expect(listed.result.isError).toBeFalsy();
  expect(listed.body).toEqual(viaDoor);
  // The caller's own main session shows as `main`; guest is outside tools.agentToAgent.allow.
  const keys = (listed.body.sessions as { key: string }[]).map((s) => s.key);
  expect(keys).toEqual(expect.arrayContaining(["main", BOB]));
  expect(keys).not.toContain(GUEST);

  // sessions_send: waits for bob's worker and returns its reply, as the door does.
  const sent = await callTool(client, "sessions_send", {
    sessionKey: BOB,
    message: `hello from ${tag}`,
    timeoutSeconds: 20,
  });
  expect(sent.result.isError).toBeFalsy();
  expect(sent.body).toMatchObject({ status: "ok", reply: `bob: hello from ${tag}`, sessionKey: BOB });
  const doorSent = await tool(sys, "sessions_send", MAIN, {
    sessionKey: BOB,
    message: `door ${tag}`,
    timeoutSeconds: 20,
  });
  expect(Object.keys(sent.body).sort()).toEqual(Object.keys(doorSent).sort());
  expect(doorSent).toMatchObject({ status: "ok", reply: `bob: door ${tag}`, sessionKey: BOB });
  // The run the MCP call started is a real run of this deployment, finished with that reply.
  expect((await sys.get(`/v1/runs/${sent.body.runId}`)).body).toMatchObject({
    status: "ok",
    reply: `bob: hello from ${tag}`,
    sessionKey: BOB,
  });

  // sessions_history: the same sanitised transcript as the door, with the message sent above.
  await queuesQuiet(sys);
  const history = await callTool(client, "sessions_history", { sessionKey: BOB, limit: 50 });
  expect(history.body).toEqual(await tool(sys, "sessions_history", MAIN, { sessionKey: BOB, limit: 50 }));
  expect(JSON.stringify(history.body.messages)).toContain(`hello from ${tag}`);

  // A target the policy forbids answers the door's forbidden result, flagged as an error.
  const denied = await callTool(client, "sessions_history", { sessionKey: GUEST });
  expect(denied.result.isError).toBe(true);
  expect(denied.body).toEqual(await tool(sys, "sessions_history", MAIN, { sessionKey: GUEST }));
  expect(denied.body).toMatchObject({ status: "forbidden", error: FORBIDDEN_HISTORY });
  const deniedSend = await callTool(client, "sessions_send", {
    sessionKey: GUEST,
    message: "let me in",
    timeoutSeconds: 5,
  });
  expect(deniedSend.result.isError).toBe(true);
  expect(deniedSend.body).toMatchObject({ status: "forbidden", error: FORBIDDEN_SEND });
  // Every send gets a fresh runId, even a refused one; the rest is the door's answer.
  const { runId: doorRunId, ...doorDenied } = await tool(sys, "sessions_send", MAIN, {
    sessionKey: GUEST,
    message: "let me in",
    timeoutSeconds: 5,
  });
  const { runId, ...mcpDenied } = deniedSend.body;
  expect(mcpDenied).toEqual(doorDenied);
  expect(runId).not.toBe(doorRunId);
}

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      gateway: { auth: { token: TOKEN } },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "bob"] } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
      agents: {
        list: [
          scriptAgent("main", [{ reply: "main: {{text}}" }], { default: true }),
          scriptAgent("bob", [{ when: { step: "announce" }, reply: "ANNOUNCE_SKIP" }, { reply: "bob: {{text}}" }]),
          scriptAgent("guest", [{ reply: "guest: {{text}}" }]),
        ],
      },
    }),
  );
  await chat(sys, "main", "1", "hi main");
  await chat(sys, "bob", "2", "hi bob");
  await chat(sys, "guest", "3", "hi guest");
  // A depth-1 orchestrator sub-agent: its profile keeps only the tools that manage children.
  await sys.svc.sessions.upsert(
    ORCHESTRATOR,
    { agentId: "main", kind: "other" },
    { sessionId: randomUUID(), spawnedBy: MAIN, spawnDepth: 1, subagentRole: "orchestrator" },
  );
  // Its leaf: allowed none of the session tools.
  await sys.svc.sessions.upsert(
    LEAF,
    { agentId: "main", kind: "other" },
    { sessionId: randomUUID(), spawnedBy: ORCHESTRATOR, spawnDepth: 2, subagentRole: "leaf" },
  );
  configFile = writeConfigFile(sys.config);
}, 60_000);

afterAll(async () => {
  await sys?.close();
});

describe("switchboard mcp over stdio", () => {
  it("lists the session's tools with their JSON schemas and answers as the HTTP tool door", async () => {
    const { transport, stderr } = stdioTransport(MAIN);
    const client = await connected(transport);
    try {
      expect(client.getServerVersion()?.name).toBe("switchboard");
      const { tools } = await client.listTools();
      // Profile `full`: every session tool, each with the JSON Schema of its zod schema.
      expect(tools.map((t) => t.name).sort()).toEqual([...MCP_TOOLS].sort());
      for (const t of tools) {
        const { $schema: _ignored, ...schema } = t.inputSchema as Record<string, unknown>;
        expect(schema, t.name).toEqual(toolJsonSchema(TOOL_SCHEMAS[t.name as keyof typeof TOOL_SCHEMAS]));
        expect(t.description, t.name).toBeTruthy();
      }
      expect(tools.find((t) => t.name === "sessions_send")!.inputSchema).toMatchObject({
        type: "object",
        required: ["message"],
        additionalProperties: false,
      });

      await sameAsToolDoor(client, "stdio");

      // Invalid arguments are refused by the schema before anything runs.
      const bad = (await client.callTool({ name: "sessions_history", arguments: { limit: 3 } })) as CallToolResult;
      expect(bad.isError).toBe(true);
      expect(JSON.stringify(bad.content)).toMatch(/sessionKey/);
    } finally {
      await client.close();
    }
    expect(stderr()).toMatch(/switchboard mcp ready: session agent:main:main over stdio/);
  }, 90_000);

  it("a session lists only the tools its profile allows; the others cannot be called", async () => {
    const { transport } = stdioTransport(ORCHESTRATOR);
    const client = await connected(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(
        MCP_TOOLS.filter((n) => (ORCHESTRATOR_TOOLS as readonly string[]).includes(n)),
      );
      expect(tools.map((t) => t.name)).not.toContain("sessions_send");
      const refused = (await client.callTool({
        name: "sessions_send",
        arguments: { sessionKey: BOB, message: "x" },
      })) as CallToolResult;
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toMatch(/sessions_send/);
      // Listed tools act as that session: it sees its own tree.
      const listed = await callTool(client, "sessions_list", {});
      expect(listed.body).toEqual(await tool(sys, "sessions_list", ORCHESTRATOR, {}));
    } finally {
      await client.close();
    }
  }, 60_000);

  it("a session allowed no tools (a leaf sub-agent) lists none, and a call is refused", async () => {
    const { transport } = stdioTransport(LEAF);
    const client = await connected(transport);
    try {
      expect((await client.listTools()).tools).toEqual([]);
      const refused = (await client.callTool({ name: "sessions_list", arguments: {} })) as CallToolResult;
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toMatch(/sessions_list/);
    } finally {
      await client.close();
    }
  }, 60_000);

  it("--session takes a stored session's sessionId too, and acts as that session (its profile)", async () => {
    const orchestrator = await sys.svc.sessions.get(ORCHESTRATOR);
    const { transport, stderr } = stdioTransport(orchestrator!.sessionId);
    const client = await connected(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).not.toContain("sessions_send");
    } finally {
      await client.close();
    }
    expect(stderr()).toContain(`switchboard mcp ready: session ${ORCHESTRATOR} over stdio`);
  }, 60_000);

  it("writes nothing but JSON-RPC to stdout and exits 0 when the client closes stdin", async () => {
    const child = spawn(process.execPath, [CLI, "mcp", "--session", MAIN, "--config", configFile], {
      cwd: ROOT,
      env: childEnv(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const send = (msg: unknown) => child.stdin.write(`${JSON.stringify(msg)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "session_status", arguments: {} } });
    await settle(() => out.split("\n").filter(Boolean).length >= 3, {
      what: "3 answers on the MCP server's stdout",
      timeoutMs: 20_000,
    });
    child.stdin.end();
    const code = await Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 10_000))]);
    if (code === "hung") child.kill("SIGKILL");
    expect(code, err).toBe(0);
    const lines = out.split("\n").filter(Boolean);
    const messages = lines.map((l) => JSON.parse(l) as { jsonrpc: string; id?: number; result?: any });
    expect(messages.every((m) => m.jsonrpc === "2.0")).toBe(true);
    expect(messages.map((m) => m.id)).toEqual([1, 2, 3]);
    expect(messages[1]!.result.tools).toHaveLength(MCP_TOOLS.length);
    expect(messages[2]!.result.structuredContent).toMatchObject({ status: "ok", details: { sessionKey: "main" } });
    expect(err).toMatch(/ready/);
  }, 60_000);
});

describe("switchboard mcp over streamable HTTP", () => {
  let server: ChildHandle;
  let url: URL;

  beforeAll(async () => {
    server = await spawnSwitchboard(["mcp", "--session", MAIN, "--config", configFile, "--http", "0"], childEnv());
    const m = /over (http:\/\/\S+\/mcp)/.exec(server.output());
    if (!m) throw new Error(`no MCP URL in: ${server.output()}`);
    url = new URL(m[1]!);
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("answers as the HTTP tool door, with the gateway token", async () => {
    const transport = new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
    });
    const client = await connected(transport);
    try {
      expect(transport.sessionId).toBeTruthy();
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([...MCP_TOOLS].sort());
      const { $schema: _ignored, ...schema } = tools.find((t) => t.name === "sessions_history")!.inputSchema as Record<
        string,
        unknown
      >;
      expect(schema).toEqual(toolJsonSchema(TOOL_SCHEMAS.sessions_history));
      await sameAsToolDoor(client, "http");
      await transport.terminateSession();
    } finally {
      await client.close();
    }
  }, 90_000);

  it("refuses requests without the token, without a session, and off /mcp", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    };
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const noToken = await fetch(url, { method: "POST", headers, body: JSON.stringify(init) });
    expect(noToken.status).toBe(401);
    const auth = { ...headers, authorization: `Bearer ${TOKEN}` };
    const noSession = await fetch(url, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(noSession.status).toBe(400);
    const unknownSession = await fetch(url, {
      method: "POST",
      headers: { ...auth, "mcp-session-id": randomUUID() },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
    });
    expect(unknownSession.status).toBe(404);
    const elsewhere = await fetch(new URL("/v1/tools/sessions_list", url), {
      method: "POST",
      headers: auth,
      body: "{}",
    });
    expect(elsewhere.status).toBe(404);
  });

  it("--token is the token this server asks for (it was ignored, leaving the port open)", async () => {
    const other = "mcp-cli-token-9876543210";
    const viaFlag = await spawnSwitchboard(
      ["--token", other, "mcp", "--session", MAIN, "--config", configFile, "--http", "0"],
      childEnv(),
    );
    try {
      const m = /over (http:\/\/\S+\/mcp)/.exec(viaFlag.output());
      if (!m) throw new Error(`no MCP URL in: ${viaFlag.output()}`);
      const init = (token: string) =>
        fetch(m[1]!, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            authorization: `Bearer ${token}`,
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
          }),
        });
      expect((await init(TOKEN)).status).toBe(401);
      const ok = await init(other);
      expect(ok.status).toBe(200);
      await ok.text();
    } finally {
      await viaFlag.stop();
    }
  }, 30_000);
});

// Last: a spawned child leaves a delayed archive job behind, so `queuesQuiet` would never see the
// queues quiet again in this deployment.
describe("switchboard mcp: sub-agents", () => {
  it("the session lists agents, spawns a sub-agent whose run really happens, and sees it in subagents", async () => {
    const { transport } = stdioTransport(MAIN);
    const client = await connected(transport);
    try {
      // agents_list and sessions_spawn: the session can start a sub-agent, whose run really happens.
      const agents = await callTool(client, "agents_list", {});
      expect(agents.body).toEqual(await tool(sys, "agents_list", MAIN, {}));
      const spawned = await callTool(client, "sessions_spawn", { task: "summarise the day", label: "mcp-child" });
      expect(spawned.body).toMatchObject({ status: "accepted" });
      expect(spawned.body.childSessionKey).toMatch(/^agent:main:subagent:/);
      const childRun = await sys.rpc("agent.wait", { runId: spawned.body.runId, timeoutMs: 15_000 });
      expect(childRun).toMatchObject({ status: "ok" });
      expect(childRun.reply).toContain("summarise the day");
      // subagents: the child, seen from the MCP session, until its result is announced back.
      const subagents = await settle(
        async () => {
          const r = await callTool(client, "subagents", { action: "list" });
          return r.body.recent?.[0]?.announce === "delivered" ? r.body : undefined;
        },
        { what: "the child's result announced back" },
      );
      expect(subagents.recent[0]).toMatchObject({
        sessionKey: spawned.body.childSessionKey,
        label: "mcp-child",
        status: "ok",
      });
      expect(subagents).toEqual(await tool(sys, "subagents", MAIN, { action: "list" }));
    } finally {
      await client.close();
    }
  }, 60_000);
});
