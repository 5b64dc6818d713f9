/**
 * Every key Switchboard builds starts with the deployment's `{prefix}` hash tag, so a Redis
 * Cluster puts all of them in one slot: Lua scripts, MULTIs and pipelines over several keys
 * never hit CROSSSLOT. Session keys and ids may themselves contain `{`/`}`; Redis hashes only the
 * first `{…}`, which is always the prefix (the prefix may not contain braces).
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { RedisKeys } from "../../src/storage/index.js";
import { transcriptKeys } from "../../src/transcript/index.js";

/** The part of `key` Redis Cluster hashes (its hash-tag rule). */
function hashedPart(key: string): string {
  const open = key.indexOf("{");
  if (open < 0) return key;
  const close = key.indexOf("}", open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

describe("Redis key layout under one hash tag", () => {
  const keys = new RedisKeys("sb-1");
  const tricky = "agent:main:{evil}:x";

  it("every RedisKeys method yields a key hashed by the prefix alone", () => {
    const methods = Object.getOwnPropertyNames(RedisKeys.prototype).filter(
      (n) =>
        n !== "constructor" && typeof Object.getOwnPropertyDescriptor(RedisKeys.prototype, n)!.value === "function",
    );
    expect(methods.length).toBeGreaterThan(20);
    for (const m of methods) {
      const key = (keys as unknown as Record<string, (a: string) => string>)[m]!(tricky);
      expect(key.startsWith("{sb-1}:"), `${m}: ${key}`).toBe(true);
      expect(hashedPart(key), m).toBe("sb-1");
    }
    // BullMQ's prefix and the transcript keys carry the same tag.
    expect(hashedPart(`${keys.bullPrefix}:runs:wait`)).toBe("sb-1");
    for (const k of Object.values(transcriptKeys(keys, "sid-1", "7"))) expect(hashedPart(k)).toBe("sb-1");
  });

  it("a prefix cannot contain braces (it would move the hash tag)", () => {
    expect(() => parseConfig({ redis: { prefix: "a}b" } })).toThrow();
    expect(() => parseConfig({ redis: { prefix: "{ab}" } })).toThrow();
  });
});
