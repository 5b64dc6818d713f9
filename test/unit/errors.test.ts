/**
 * The error protocol: one code -> HTTP status table, one mapping of Lua refusals to typed
 * errors (checked against the replies a real Redis gives, and against every error_reply the
 * scripts contain), one "Redis is down" test.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ERROR_CODES,
  HTTP_STATUS_BY_CODE,
  LabelConflictError,
  SCRIPT_ERRORS,
  SessionConflictError,
  StaleFenceError,
  SwitchboardError,
  fromScriptError,
  httpStatusOf,
  isRedisDown,
  parseScriptError,
  redisFailure,
} from "../../src/errors/index.js";
import { createRedis } from "../../src/queues/redis-connections.js";
import { freePort } from "../helpers/redis-server.js";
import { newRedis } from "../helpers/context.js";

describe("code -> HTTP status", () => {
  it("gives every code a 4xx or 5xx status", () => {
    expect(ERROR_CODES.length).toBeGreaterThan(20);
    for (const code of ERROR_CODES) {
      const status = HTTP_STATUS_BY_CODE[code];
      expect(Number.isInteger(status) && status >= 400 && status < 600, `${code}: ${status}`).toBe(true);
    }
  });

  it("keeps the statuses clients already see", () => {
    // The gateway's answers before the table moved to src/errors/codes.ts.
    const published: Record<string, number> = {
      invalid_request: 400,
      invalid_session_key: 400,
      invalid_agent_id: 400,
      invalid_session_id: 400,
      invalid_config: 400,
      unauthorized: 401,
      forbidden: 403,
      send_blocked: 403,
      session_not_found: 404,
      run_not_found: 404,
      not_found: 404,
      model_not_found: 404,
      payload_too_large: 413,
      label_conflict: 409,
      session_conflict: 409,
      session_exists: 409,
      lineage_immutable: 409,
      unavailable: 503,
      // Not mapped before: they fell through to 500.
      stale_fence: 500,
      session_busy: 500,
      invalid_entry: 500,
      transcript_locked: 500,
      turn_handed_back: 500,
      deployment_mismatch: 500,
    };
    for (const [code, status] of Object.entries(published)) expect(httpStatusOf(code), code).toBe(status);
    expect(httpStatusOf("no_such_code")).toBe(500);
  });
});

describe("Lua script errors", () => {
  const redis = newRedis();
  afterAll(() => redis.disconnect());

  /** The reply error a real Redis gives for `redis.error_reply(text)`. */
  async function replyError(text: string): Promise<unknown> {
    return await redis.eval(`return redis.error_reply(ARGV[1])`, 0, text).then(
      () => expect.unreachable("eval should fail"),
      (err: unknown) => err,
    );
  }

  it("reads the code whether or not Redis prefixed ERR", async () => {
    const stale = await replyError("STALE"); // arrives as "ERR STALE"
    expect((stale as Error).message).toBe("ERR STALE");
    expect(parseScriptError(stale)).toEqual({ code: "STALE", detail: "" });
    expect(parseScriptError(await replyError("ERR_CONFLICT sid-2"))).toEqual({ code: "ERR_CONFLICT", detail: "sid-2" });
    expect(parseScriptError(await replyError("ERR_NO_SESSION_ID"))).toEqual({ code: "ERR_NO_SESSION_ID", detail: "" });
  });

  it("maps each code to its typed error, with what the caller knows", async () => {
    const ctx = { sessionKey: "agent:main:main", token: 7, label: "ops" };
    const stale = fromScriptError(await replyError("STALE"), ctx);
    expect(stale).toBeInstanceOf(StaleFenceError);
    expect((stale as StaleFenceError).details).toMatchObject({ sessionKey: ctx.sessionKey, token: 7 });
    const conflict = fromScriptError(await replyError("ERR_CONFLICT sid-2"), ctx);
    expect(conflict).toBeInstanceOf(SessionConflictError);
    expect((conflict as SessionConflictError).details).toMatchObject({ currentSessionId: "sid-2" });
    const label = fromScriptError(await replyError("ERR_LABEL agent:main:other"), ctx);
    expect(label).toBeInstanceOf(LabelConflictError);
    expect((label as LabelConflictError).details).toMatchObject({ label: "ops", holder: "agent:main:other" });
    const codes: Record<string, string> = {
      ERR_BUSY: "session_busy",
      ERR_MISSING: "session_not_found",
      ERR_EXISTS: "session_exists",
      "ERR_LINEAGE spawnedBy": "lineage_immutable",
      ERR_NO_SESSION_ID: "invalid_entry",
    };
    for (const [reply, code] of Object.entries(codes)) {
      const err = fromScriptError(await replyError(reply), ctx);
      expect(err, reply).toBeInstanceOf(SwitchboardError);
      expect((err as SwitchboardError).code, reply).toBe(code);
    }
  });

  it("passes other reply errors through untouched", async () => {
    const busy = await replyError("BUSY Redis is busy running a script");
    expect(fromScriptError(busy, { sessionKey: "k" })).toBe(busy);
    const other = await redis.eval("return redis.call('INCR', 'x', 'y')", 0).catch((e: unknown) => e);
    expect(fromScriptError(other, { sessionKey: "k" })).toBe(other);
    const plain = new Error("STALE fence somewhere in a sentence");
    expect(fromScriptError(plain, { sessionKey: "k" })).toBe(plain);
  });

  it("knows every code a Lua script can answer", () => {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(dir, e.name));
        else if (e.name.endsWith(".lua")) files.push(join(dir, e.name));
      }
    };
    walk("src");
    const found = new Set<string>();
    for (const f of files) {
      for (const m of readFileSync(f, "utf8").matchAll(/redis\.error_reply\("([^"\s]+)/g)) {
        found.add(m[1]!);
        expect(Object.keys(SCRIPT_ERRORS), `${f}: ${m[1]}`).toContain(m[1]);
      }
    }
    // Every code in the table is still used by some script (no dead protocol entries).
    expect([...found].sort()).toEqual(Object.keys(SCRIPT_ERRORS).sort());
  });
});

describe("Redis is down", () => {
  it("recognises what a producer connection throws with nobody listening", async () => {
    const port = await freePort();
    const r = createRedis(`redis://127.0.0.1:${port}`, "producer");
    try {
      const err = await r.get("k").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(isRedisDown(err)).toBe(true);
    } finally {
      r.disconnect();
    }
  });

  it("takes a command a hung Redis never answered for an outage: 503 unavailable, Retry-After 1", () => {
    // ioredis's error once a connection's commandTimeout passes (producer and CLI connections).
    const timedOut = new Error("Command timed out");
    expect(isRedisDown(timedOut)).toBe(true);
    const failure = redisFailure(timedOut);
    expect(failure).toMatchObject({ code: "unavailable", details: { retryAfterSeconds: 1 } });
    expect(httpStatusOf(failure!.code)).toBe(503);
    expect(isRedisDown(new Error("Command timed out while parsing"))).toBe(false);
  });

  it("does not take other failures for an outage", () => {
    expect(isRedisDown(new Error("WRONGTYPE Operation against a key holding the wrong kind of value"))).toBe(false);
    expect(isRedisDown(new SwitchboardError("unavailable", "ECONNREFUSED in a typed error is already answered"))).toBe(
      false,
    );
    expect(isRedisDown("ECONNREFUSED")).toBe(false);
  });
});
