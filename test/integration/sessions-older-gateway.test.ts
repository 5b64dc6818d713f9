/**
 * `switchboard sessions` against a gateway of an earlier release, whose `sessions.list` takes no
 * `order` or `cursor` (its params are strict: it refuses them, invalid_request). A listing of one
 * page must not send them; `--all` (or a `--limit` of more than one page) that such a gateway
 * refuses pages by offset instead, with a one-line warning. The stub answers as that release did:
 * its params checked by its schema, the rows from a real gateway by offset.
 */
import Fastify, { type FastifyInstance } from "fastify";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OFFSET_PAGING_WARNING, SESSIONS_PAGE, sessionsCommand } from "../../src/cli/commands/sessions.js";
import { zodIssues } from "../../src/config/parse.js";
import { ValidationError } from "../../src/errors/index.js";
import type { SessionEntry } from "../../src/session/session-entry.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
let older: FastifyInstance;
let olderUrl: string;
/** The params of every `sessions.list` the older gateway was asked. */
const asked: Record<string, unknown>[] = [];

/** The earlier release's `sessions.list` params: offset paging only, unknown keys refused. */
const OlderListParams = z.strictObject({
  limit: z.number().int().min(1).max(10_000).optional(),
  activeMinutes: z.number().int().min(1).optional(),
  agentId: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]*$/)
    .optional(),
  kinds: z.array(z.string()).optional(),
  label: z.string().optional(),
  search: z.string().max(200).optional(),
  spawnedBy: z.string().optional(),
  includeGlobal: z.boolean().optional(),
  includeUnknown: z.boolean().optional(),
  offset: z.number().int().min(0).max(1_000_000).optional(),
});

beforeAll(async () => {
  sys = await startTestSystem({}, { gateway: true, workers: false });
  older = Fastify();
  older.post("/v1/rpc/sessions.list", async (req, reply) => {
    const params = (req.body ?? {}) as Record<string, unknown>;
    asked.push(params);
    const r = OlderListParams.safeParse(params);
    if (!r.success) {
      const err = ValidationError.fromIssues("invalid params for sessions.list", zodIssues(r.error));
      return reply.status(400).send({ ok: false, error: err.toJSON() });
    }
    return { ok: true, result: await sys.rpc("sessions.list", r.data) };
  });
  olderUrl = await older.listen({ host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  await older?.close();
  await sys?.close();
});

/** `n` sessions of `agent`, one millisecond apart. */
async function seed(agent: string, n: number): Promise<string[]> {
  const keys = Array.from({ length: n }, (_, i) => `agent:${agent}:s${String(i).padStart(5, "0")}`);
  const now = Date.now() - n;
  await Promise.all(
    keys.map((key, i) =>
      sys.svc.sessions.upsert(key, { agentId: agent, kind: "other" }, { sessionId: `${agent}-${i}` }, { now: now + i }),
    ),
  );
  return keys;
}

/** `switchboard sessions --json` at the older gateway: its exit code, what it printed and warned. */
async function listAtOlder(
  extra: Record<string, unknown>,
): Promise<{ code: number; sessions: SessionEntry[]; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const write = process.stdout.write;
  const writeErr = process.stderr.write;
  process.stdout.write = ((chunk: string) => {
    out.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string) => {
    err.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    const code = await sessionsCommand({ url: olderUrl, json: true, ...extra });
    return {
      code,
      sessions: (JSON.parse(out.join("")) as { sessions: SessionEntry[] }).sessions,
      stderr: err.join(""),
    };
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
  }
}

describe("sessions at a gateway of an earlier release (no order/cursor)", () => {
  it("a listing of one page asks without order or cursor, as that release expects", async () => {
    const keys = await seed("plain", 5);
    asked.length = 0;
    const r = await listAtOlder({ agent: "plain" });
    expect(r.code).toBe(0);
    expect(r.sessions.map((s) => s.key)).toEqual([...keys].reverse());
    expect(r.stderr).toBe("");
    expect(asked).toEqual([{ agentId: "plain", limit: SESSIONS_PAGE }]);
  });

  it("--all pages by offset once refused, with one warning, and lists every session", async () => {
    // More than one page of 1,000 rows.
    const keys = await seed("every", 1_500);
    asked.length = 0;
    const r = await listAtOlder({ agent: "every", all: true });
    expect(r.code).toBe(0);
    expect(r.stderr.trim()).toBe(OFFSET_PAGING_WARNING);
    expect(r.sessions.map((s) => s.key)).toEqual([...keys].reverse());
    // Refused once (order), then by offset: no order or cursor asked again.
    expect(asked[0]).toMatchObject({ order: "oldest" });
    expect(asked.slice(1).map((p) => p.offset ?? 0)).toEqual([0, 1_000]);
    expect(asked.slice(1).every((p) => !("order" in p) && !("cursor" in p))).toBe(true);
  });

  it("a --limit of more than one page does the same", async () => {
    const keys = await seed("many", 300);
    const r = await listAtOlder({ agent: "many", limit: "250" });
    expect(r.code).toBe(0);
    expect(r.stderr.trim()).toBe(OFFSET_PAGING_WARNING);
    expect(r.sessions.map((s) => s.key)).toEqual([...keys].reverse().slice(0, 250));
  });

  it("another refusal is not taken for an earlier release: it fails as before", async () => {
    await expect(listAtOlder({ agent: "bad agent id!", all: true })).rejects.toMatchObject({ code: "invalid_request" });
  });
});
