/**
 * "Redis is full": with `maxmemory` set and the `noeviction` policy doctor asks for, Redis
 * refuses every command that could grow its memory with `OOM command not allowed when used
 * memory > 'maxmemory'.` (from inside a script followed by the script's hash and line). It is
 * not "Redis is down" (it answers, and reads still work) and not a bug: the gateway answers it
 * with 503 `redis_full` and a message that says what to do, never Redis's own text.
 *
 * Also here, for /readyz and doctor: reading how full Redis is from `INFO memory`.
 */
import { SwitchboardError } from "./switchboard-error.js";

/** What every door says instead of Redis's OOM reply. */
export const REDIS_FULL_MESSAGE =
  "Redis is out of memory (maxmemory); nothing was queued — raise maxmemory or free memory";

/** Seconds a client is asked to wait (`Retry-After`): freeing memory takes an operator, not a blink. */
export const REDIS_FULL_RETRY_AFTER_S = 10;

/** At this share of maxmemory doctor warns. */
export const REDIS_NEARLY_FULL_RATIO = 0.9;

const OOM = /^OOM /;

/**
 * Whether `err` is Redis refusing a write for maxmemory: an `OOM …` reply, or a MULTI that
 * Redis discarded because one of its commands got one (ioredis: EXECABORT, `previousErrors`).
 */
export function isRedisFull(err: unknown): boolean {
  if (err instanceof SwitchboardError || !(err instanceof Error)) return false;
  if (OOM.test(err.message)) return true;
  const previous = (err as { previousErrors?: unknown }).previousErrors;
  return (
    err.message.startsWith("EXECABORT") &&
    Array.isArray(previous) &&
    previous.some((e) => e instanceof Error && OOM.test(e.message))
  );
}

export interface RedisMemory {
  usedBytes: number;
  /** 0: no limit (Redis grows until the host runs out). */
  maxBytes: number;
  /** used / max, or undefined without a limit. */
  ratio: number | undefined;
  /** Writes refused for maxmemory since Redis started (or CONFIG RESETSTAT): `errorstat_OOM`. */
  oomRefusals: number;
}

function field(info: string, name: string): string | undefined {
  const m = new RegExp(`^${name}:(.*)$`, "m").exec(info);
  return m?.[1]?.trim();
}

/**
 * How full Redis is, from the text of `INFO` (the default sections, or `INFO memory` plus
 * `INFO errorstats`); undefined when it carries no `used_memory` (not a Redis INFO).
 */
export function redisMemory(info: string): RedisMemory | undefined {
  const used = Number(field(info, "used_memory"));
  if (!Number.isFinite(used)) return undefined;
  const max = Number(field(info, "maxmemory") ?? 0) || 0;
  const oom = /^errorstat_OOM:count=(\d+)/m.exec(info);
  return {
    usedBytes: used,
    maxBytes: max,
    ratio: max > 0 ? used / max : undefined,
    oomRefusals: oom ? Number(oom[1]) : 0,
  };
}

/** Whether Redis is at or over its maxmemory (writes are being refused, or will be at the next one). */
export function isFull(mem: RedisMemory | undefined): boolean {
  return mem?.ratio !== undefined && mem.ratio >= 1;
}
