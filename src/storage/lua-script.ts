/**
 * Lua scripts live in their own `.lua` files (readable, each with a header comment: what it
 * does, KEYS, ARGV, what it returns) and are registered on an ioredis client with
 * `defineCommand`, which uses EVALSHA and falls back to EVAL after a script-cache flush (e.g. a
 * Redis restart).
 *
 * A line `--@include <name>` is replaced by the file `<name>.lua` of the same folder, so two
 * scripts can share a function (one definition of "begin the next turn", used by turn-begin
 * and by the finish that begins the next turn in the same step), or by a generated include
 * (GENERATED below) when TypeScript owns the definition. Each include is expanded once per
 * script, however many of its includes ask for it.
 */
import { readFileSync } from "node:fs";
import type { RedisClient } from "./redis-client.js";
import { runStatusLua } from "../runs/run-status.js";

/** Includes built from TypeScript constants, so Lua and TypeScript share one definition. */
const GENERATED: Record<string, () => string> = {
  "run-status": runStatusLua,
};

const cache = new Map<string, string>();

export function readLua(dirUrl: string | URL, name: string): string {
  const key = new URL(`${name}.lua`, dirUrl).href;
  let text = cache.get(key);
  if (text === undefined) {
    text = expand(dirUrl, name, new Set([name]));
    cache.set(key, text);
  }
  return text;
}

function expand(dirUrl: string | URL, name: string, seen: Set<string>): string {
  const generated = GENERATED[name];
  const source = generated ? generated() : readFileSync(new URL(`${name}.lua`, dirUrl), "utf8");
  return source.replace(/^--@include ([\w-]+)[ \t]*$/gm, (_line, inc: string) => {
    if (seen.has(inc)) return `-- (${inc}: included above)`;
    seen.add(inc);
    return expand(dirUrl, inc, seen);
  });
}

/** Define `name` on the client once (idempotent per client), returning a typed caller. */
export function luaCommand(
  redis: RedisClient,
  dirUrl: string | URL,
  name: string,
): (keys: string[], args: (string | number)[]) => Promise<unknown> {
  const cmd = `sb_${name.replace(/[^a-zA-Z0-9]/g, "_")}`;
  const r = redis as unknown as Record<string, unknown>;
  if (typeof r[cmd] !== "function") {
    redis.defineCommand(cmd, { lua: readLua(dirUrl, name) });
  }
  return (keys, args) =>
    (r[cmd] as (n: number, ...a: (string | number)[]) => Promise<unknown>).call(redis, keys.length, ...keys, ...args);
}
