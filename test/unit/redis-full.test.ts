/**
 * Redis at its maxmemory (review "load", finding 2): the OOM reply is recognised as its own
 * condition (`redis_full`, 503), INFO is judged for doctor (warn at 90 %, fail at 100 % or near
 * it with refusals counted), the MCP door maps it, and the worker's error log is throttled.
 */
import { describe, expect, it } from "vitest";
import {
  REDIS_FULL_MESSAGE,
  SwitchboardError,
  httpStatusOf,
  isFull,
  isRedisDown,
  isRedisFull,
  redisMemory,
} from "../../src/errors/index.js";
import { judgeRedisMemory } from "../../src/doctor/checks.js";
import { errorResult } from "../../src/mcp/server.js";
import { RepeatThrottle } from "../../src/workers/worker-host.js";

const OOM_IN_SCRIPT =
  "OOM command not allowed when used memory > 'maxmemory'. script: 6786e197b4b3a4c5d6e7f8091a2b3c4d5e6f7081, " +
  "on @user_script:58.";

function replyError(message: string): Error {
  const err = new Error(message);
  err.name = "ReplyError";
  return err;
}

/** INFO text as Redis writes it (CRLF lines, section headers). */
function info(used: number, max: number, oom?: number): string {
  return [
    "# Memory",
    `used_memory:${used}`,
    `used_memory_human:${used}B`,
    `maxmemory:${max}`,
    "maxmemory_policy:noeviction",
    "",
    "# Errorstats",
    ...(oom !== undefined ? [`errorstat_OOM:count=${oom}`, "errorstat_ERR:count=3"] : []),
    "",
  ].join("\r\n");
}

describe("the OOM reply", () => {
  it("is redis_full, answered 503, and not 'Redis is down'", () => {
    expect(httpStatusOf("redis_full")).toBe(503);
    expect(isRedisFull(replyError(OOM_IN_SCRIPT))).toBe(true);
    expect(isRedisFull(replyError("OOM command not allowed when used memory > 'maxmemory'."))).toBe(true);
    expect(isRedisDown(replyError(OOM_IN_SCRIPT))).toBe(false);
  });

  it("is recognised in a MULTI Redis discarded for it", () => {
    const execAbort = Object.assign(replyError("EXECABORT Transaction discarded because of previous errors."), {
      previousErrors: [replyError("OOM command not allowed when used memory > 'maxmemory'.")],
    });
    expect(isRedisFull(execAbort)).toBe(true);
    const otherAbort = Object.assign(replyError("EXECABORT Transaction discarded because of previous errors."), {
      previousErrors: [replyError("ERR wrong number of arguments")],
    });
    expect(isRedisFull(otherAbort)).toBe(false);
  });

  it("only at the start of the message, and never for our own errors", () => {
    expect(isRedisFull(replyError("ERR something about OOM "))).toBe(false);
    expect(isRedisFull(new SwitchboardError("internal", OOM_IN_SCRIPT))).toBe(false);
    expect(isRedisFull(OOM_IN_SCRIPT)).toBe(false);
    expect(isRedisFull(undefined)).toBe(false);
  });

  it("is a redis_full tool result over MCP, without the script text", () => {
    const r = errorResult(replyError(OOM_IN_SCRIPT));
    expect(r).toEqual({ status: "error", code: "redis_full", error: REDIS_FULL_MESSAGE });
    expect(JSON.stringify(r)).not.toMatch(/script|6786e197|maxmemory'/);
  });
});

describe("INFO memory", () => {
  it("reads used, max and the OOM refusals", () => {
    expect(redisMemory(info(900, 1000, 7))).toEqual({ usedBytes: 900, maxBytes: 1000, ratio: 0.9, oomRefusals: 7 });
    expect(redisMemory(info(900, 0))).toEqual({ usedBytes: 900, maxBytes: 0, ratio: undefined, oomRefusals: 0 });
    expect(redisMemory("# Server\r\nredis_version:7.0.15\r\n")).toBeUndefined();
  });

  it("is full at or over maxmemory, never without one", () => {
    expect(isFull(redisMemory(info(1000, 1000)))).toBe(true);
    expect(isFull(redisMemory(info(1200, 1000)))).toBe(true);
    expect(isFull(redisMemory(info(999, 1000)))).toBe(false);
    expect(isFull(redisMemory(info(10 ** 12, 0)))).toBe(false);
    expect(isFull(undefined)).toBe(false);
  });
});

describe("doctor's judgement of Redis memory", () => {
  const judge = (used: number, max: number, oom = 0) => judgeRedisMemory(redisMemory(info(used, max, oom)));

  it("says nothing without a maxmemory, or well below it", () => {
    expect(judge(10 ** 9, 0)).toEqual([]);
    expect(judge(500, 1000)).toEqual([]);
    expect(judge(899, 1000)).toEqual([]);
  });

  it("warns at 90 %", () => {
    const [f, ...rest] = judge(900 * 1024 ** 2, 1000 * 1024 ** 2);
    expect(rest).toEqual([]);
    expect(f).toMatchObject({ check: "redis", level: "warn" });
    expect(f!.message).toContain("90 %");
    expect(f!.message).toContain("nearly full");
    expect(f!.fix).toMatch(/maxmemory/);
  });

  it("fails at 100 % and over", () => {
    for (const used of [1000, 1001, 5000]) {
      const [f, ...rest] = judge(used, 1000);
      expect(rest).toEqual([]);
      expect(f).toMatchObject({ check: "redis", level: "fail" });
      expect(f!.message).toMatch(/out of memory.*every write is refused/);
    }
  });

  it("fails near it when Redis has refused writes for it (a recent OOM)", () => {
    const [f] = judge(950, 1000, 12);
    expect(f).toMatchObject({ check: "redis", level: "fail" });
    expect(f!.message).toContain("refused 12 writes");
  });

  it("warns of refusals counted while memory is low now (they may be long over)", () => {
    const [f] = judge(100, 1000, 1);
    expect(f).toMatchObject({ check: "redis", level: "warn" });
    expect(f!.message).toMatch(/refused 1 write for maxmemory since it started/);
  });
});

describe("worker error log throttle", () => {
  it("logs the first of a message, then at most one line per window with the count held back", () => {
    const t = new RepeatThrottle(10_000);
    expect(t.admit("OOM x", 0)).toEqual({ suppressed: 0 });
    for (let i = 1; i <= 999; i++) expect(t.admit("OOM x", i)).toBeUndefined();
    // Another message, another queue of lines.
    expect(t.admit("ECONNRESET", 500)).toEqual({ suppressed: 0 });
    expect(t.admit("OOM x", 9_999)).toBeUndefined();
    expect(t.admit("OOM x", 10_000)).toEqual({ suppressed: 1000 });
    expect(t.admit("OOM x", 10_001)).toBeUndefined();
    expect(t.admit("OOM x", 20_000)).toEqual({ suppressed: 1 });
  });

  it("flushes the count of a flood that stopped, once, and then forgets it", () => {
    const t = new RepeatThrottle(10_000);
    t.admit("OOM x", 0);
    for (let i = 1; i <= 50; i++) t.admit("OOM x", i);
    t.admit("quiet", 0);
    expect(t.flush(5_000)).toEqual([]);
    expect(t.flush(10_000)).toEqual([{ message: "OOM x", suppressed: 50 }]);
    // The flushed line was that window's line: the next one waits for the next window.
    expect(t.admit("OOM x", 12_000)).toBeUndefined();
    expect(t.flush(20_000)).toEqual([{ message: "OOM x", suppressed: 1 }]);
    expect(t.flush(30_000)).toEqual([]);
    expect(t.admit("OOM x", 30_001)).toEqual({ suppressed: 0 });
    expect(t.admit("quiet", 30_001)).toEqual({ suppressed: 0 });
  });

  it("remembers a bounded number of distinct messages", () => {
    const t = new RepeatThrottle(10_000, 3);
    for (const m of ["a", "b", "c", "d"]) expect(t.admit(m, 0)).toEqual({ suppressed: 0 });
    // "a" was forgotten to make room for "d": it logs again; "d" is still held back.
    expect(t.admit("a", 1)).toEqual({ suppressed: 0 });
    expect(t.admit("d", 1)).toBeUndefined();
  });
});
