/**
 * Switchboard's HTTP API as the integration and e2e tests use it: one copy of each call (deploy,
 * inbound, wait for a run, call a tool, read history, entries and deliveries), so a test reads
 * as what it does and every file checks the answers the same way. Everything goes through the
 * real gateway over HTTP; nothing here reaches into Redis.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import type { SystemOptions } from "../../src/app/system.js";
import { startTestSystem, type TestSystem } from "./system.js";
import { settle } from "./settle.js";

// ---------------------------------------------------------------------------------------------
// Deployments and their cleanup

const cleanups: (() => Promise<unknown>)[] = [];

/** Something to undo when the file's tests are done with it (run by `cleanUp`, newest first). */
export function onCleanUp(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

/**
 * Undo everything `deploy` and `onCleanUp` registered, newest first (workers before the
 * deployment they serve). Call it from the `afterEach` or `afterAll` that matches where the
 * deployments are made. A failing cleanup does not stop the others.
 */
export async function cleanUp(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
}

/** A whole Switchboard (gateway on port 0 + in-process workers unless `opts` says otherwise), closed by `cleanUp`. */
export async function deploy(overrides: ConfigInput = {}, opts?: SystemOptions): Promise<TestSystem> {
  const sys = await startTestSystem(overrides, opts);
  onCleanUp(() => sys.close());
  return sys;
}

// ---------------------------------------------------------------------------------------------
// Inbound messages and runs

export interface Accepted {
  runId: string;
  sessionKey: string;
  sessionId: string;
  agentId?: string;
  [k: string]: unknown;
}

/**
 * POST /v1/inbound with `body` (an object, or raw JSON text to test the parser); expects 202.
 * A message blocked by sendPolicy is 202 too, without a runId: the body says `blocked`.
 */
export async function inbound(sys: TestSystem, body: Record<string, unknown> | string): Promise<Accepted> {
  const res = await sys.post("/v1/inbound", body);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body as Accepted;
}

/** agent.wait: the run's outcome (`status` ok | error | timeout, `reply`, …) within `timeoutMs`. */
export async function waitRun(sys: TestSystem, runId: string, timeoutMs = 15_000): Promise<any> {
  return await sys.rpc("agent.wait", { runId, timeoutMs });
}

/** agent.wait, and the run must have ended `ok`. */
export async function runOk(sys: TestSystem, runId: string, timeoutMs = 15_000): Promise<any> {
  const r = await waitRun(sys, runId, timeoutMs);
  expect(r.status, `run ${runId}: ${JSON.stringify(r)}`).toBe("ok");
  return r;
}

export interface RunRecordBody {
  runId: string;
  sessionKey: string;
  status: string;
  reply?: string;
  error?: string;
  startedAt?: number;
  endedAt?: number;
  attempts?: number;
  createdAt?: number;
}

/** GET /v1/runs/<runId>; throws (so `settle` keeps polling) unless 200. */
export async function getRun(sys: TestSystem, runId: string): Promise<RunRecordBody> {
  const r = await sys.get(`/v1/runs/${runId}`);
  if (r.status !== 200) throw new Error(`GET /v1/runs/${runId}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as RunRecordBody;
}

/** Until the run's record says `running` (a worker has started the turn). */
export async function waitRunning(sys: TestSystem, runId: string, timeoutMs = 15_000): Promise<void> {
  await settle(async () => (await getRun(sys, runId)).status === "running", {
    what: `run ${runId} running`,
    timeoutMs,
    stepMs: 25,
  });
}

// ---------------------------------------------------------------------------------------------
// Tools, sessions, history, deliveries

/** POST /v1/tools/<name> as `caller`; always HTTP 200 for a well-formed body. */
export async function tool(
  sys: TestSystem,
  name: string,
  caller: string,
  args: Record<string, unknown>,
  extra: { sandboxed?: boolean } = {},
): Promise<any> {
  const r = await sys.post(`/v1/tools/${name}`, { sessionKey: caller, args, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

/** chat.history: the session's transcript as operators see it (unsanitised), oldest first. */
export async function history(sys: TestSystem, sessionKey: string, limit?: number): Promise<any[]> {
  return (await sys.rpc("chat.history", { sessionKey, ...(limit ? { limit } : {}) })).messages;
}

/** sessions.resolve: the session's entry (sessionId, previousSessionId, overrides, …). */
export async function entryOf(sys: TestSystem, key: string): Promise<any> {
  return (await sys.rpc("sessions.resolve", { key })).entry;
}

/** A delivery record as GET /v1/deliveries lists it. */
export interface Delivery {
  id: string;
  channel: string;
  to?: string;
  message: string;
  sessionKey: string;
  status: string;
  attempts: number;
  ts: number;
  error?: string;
  kind?: string;
}

/** GET /v1/deliveries with filters (sessionKey, channel, limit), newest first. */
export async function deliveries(sys: TestSystem, query: Record<string, string | number> = {}): Promise<Delivery[]> {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
  const res = await sys.get(`/v1/deliveries${qs ? `?${qs}` : ""}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.deliveries;
}

/** Until the session has a delivery in a final state (not `pending`), and that delivery. */
export async function finalDelivery(sys: TestSystem, sessionKey: string, timeoutMs = 10_000): Promise<Delivery> {
  return await settle(async () => (await deliveries(sys, { sessionKey })).find((x) => x.status !== "pending"), {
    what: `a final delivery for ${sessionKey}`,
    timeoutMs,
  });
}

/** The agent's transcript directory in shared storage. */
export function sessionsDir(sys: TestSystem, agentId = "main"): string {
  return join(sys.config.storage.dir, "agents", agentId, "sessions");
}

/** File names in the agent's transcript directory (none yet: empty). */
export function sessionFiles(sys: TestSystem, agentId = "main"): string[] {
  try {
    return readdirSync(sessionsDir(sys, agentId));
  } catch {
    return [];
  }
}

/** The user texts of a session's transcript (chat.history), oldest first; content parts joined. */
export async function userTexts(sys: TestSystem, sessionKey: string): Promise<string[]> {
  const { messages } = await sys.rpc("chat.history", { sessionKey });
  return (messages as { role: string; content: unknown }[])
    .filter((m) => m.role === "user")
    .map((m) =>
      typeof m.content === "string" ? m.content : (m.content as { text?: string }[]).map((p) => p.text ?? "").join(""),
    );
}

/**
 * Wait for the deployment's first scheduled sweep, which BullMQ runs as soon as the workers
 * register its schedule: sessions stamped in the past are due by the wall clock, and a sweep
 * landing in the middle of a test would rotate them (or, finding one busy, put it off a minute).
 */
export async function bootSweepDone(sys: TestSystem): Promise<void> {
  const maintenance = sys.svc.queues.maintenance;
  await settle(async () => (await maintenance.getJobs(["completed"])).some((j) => j.name === "sweep") || null, {
    what: "the sweep run when the workers started",
  });
}
