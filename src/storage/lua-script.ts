/**
 * Lua scripts live in their own `.lua` files (readable, with KEYS/ARGV headers) and are
 * registered on an ioredis client with `defineCommand`, which uses EVALSHA and falls back to
 * EVAL after a script-cache flush (e.g. a Redis restart).
 *
 * A line `--@include <name>` is replaced by the file `<name>.lua` of the same folder, so two
 * scripts can share a function (one definition of "begin the next turn", used by turn-begin
 * and by the finish that begins the next turn in the same step).
 */
import { readFileSync } from "node:fs";
import type { RedisClient } from "./redis-client.js";

const cache = new Map<string, string>();

export function readLua(dirUrl: string | URL, name: string): string {
  const url = new URL(`${name}.lua`, dirUrl);
  const key = url.href;
  let text = cache.get(key);
  if (text === undefined) {
    text = readFileSync(url, "utf8").replace(/^--@include ([\w-]+)\s*$/gm, (_line, inc: string) => readLua(dirUrl, inc));
    cache.set(key, text);
  }
  return text;
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
