/**
 * `mergePatch` / `patchChangesNothing` (src/session/entry-patch.ts) against the store itself:
 * random entries and patches written through session-upsert.lua on a real Redis, and the stored
 * result compared with what the pure functions say it would be. A writer relies on them to skip
 * a write, so they must never say "no change" when the store would change something.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { SessionStore } from "../../src/storage/index.js";
import type { SessionEntry, SessionEntryPatch } from "../../src/session/session-entry.js";
import { mergePatch, patchChangesNothing } from "../../src/session/entry-patch.js";
import { newRedis, uniquePrefix } from "../helpers/context.js";

let redis: Redis;
let store: SessionStore;
let prefix: string;
const IDENT = { agentId: "main", kind: "other" as const };

beforeAll(() => {
  redis = newRedis();
  prefix = uniquePrefix("entry-patch");
  store = new SessionStore(redis, prefix);
});
afterAll(async () => {
  const keys = await redis.keys(`{${prefix}}:*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

/** A small deterministic random source (mulberry32), so a failure can be replayed. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const STRINGS = ["tg", "wa", "u1", "u2", "", "Ann", "7"] as const;

function randomObject(r: () => number, nulls: boolean): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const f of ["channel", "to", "accountId", "threadId"])
    if (r() < 0.6) out[f] = nulls && r() < 0.25 ? null : pick(r, STRINGS);
  return out;
}

function randomEntry(r: () => number): Record<string, unknown> {
  const e: Record<string, unknown> = { sessionId: "sid-1" };
  for (const f of ["channel", "chatType", "displayName", "lastTo", "lastAccountId"])
    if (r() < 0.6) e[f] = pick(r, STRINGS);
  if (r() < 0.7) e.deliveryContext = randomObject(r, false);
  if (r() < 0.5) e.origin = { provider: pick(r, STRINGS), from: pick(r, STRINGS) };
  if (r() < 0.2) e.resetAt = 5;
  return e;
}

function randomPatch(r: () => number, entry: Record<string, unknown>): SessionEntryPatch {
  const p: Record<string, unknown> = {};
  // Mostly the entry's own values (the interesting case: nothing or almost nothing changes).
  for (const f of ["channel", "chatType", "displayName", "lastTo", "lastAccountId", "resetAt"]) {
    const x = r();
    if (x < 0.6) p[f] = entry[f] ?? null;
    else if (x < 0.7) p[f] = null;
    else if (x < 0.8) p[f] = pick(r, STRINGS);
  }
  const x = r();
  if (x < 0.6 && entry.deliveryContext) p.deliveryContext = { ...(entry.deliveryContext as object) };
  else if (x < 0.8) p.deliveryContext = randomObject(r, true);
  else if (x < 0.83) p.deliveryContext = null;
  if (r() < 0.5) p.origin = entry.origin ? { ...(entry.origin as object) } : { provider: pick(r, STRINGS) };
  return p as SessionEntryPatch;
}

/** The fields a write always sets or stamps: not part of what a patch changes. */
function comparable(e: Record<string, unknown>): Record<string, unknown> {
  const { updatedAt: _u, rev: _r, key: _k, createdAt: _c, agentId: _a, kind: _kind, ...rest } = e;
  return rest;
}

describe("what a patch does to an entry, as the store does it", () => {
  it("mergePatch is what the store writes; patchChangesNothing is true exactly when nothing changed", async () => {
    const r = rng(20261126);
    let unchanged = 0;
    for (let i = 0; i < 400; i++) {
      const key = `agent:main:case-${i}`;
      const seed = randomEntry(r);
      const before = await store.upsert(key, IDENT, seed as SessionEntryPatch, { now: 1000, mode: "create" });
      const patch = randomPatch(r, before as unknown as Record<string, unknown>);
      const after = await store.upsert(key, IDENT, patch, { now: 1000, activity: "preserve" });
      const expected = mergePatch(before, { ...patch, agentId: IDENT.agentId, kind: IDENT.kind });
      const what = `case ${i}: ${JSON.stringify({ before, patch })}`;
      expect(comparable(after as unknown as Record<string, unknown>), what).toEqual(
        comparable(expected as unknown as Record<string, unknown>),
      );
      const same = sameAsJson(after, before);
      expect(patchChangesNothing(before, patch), what).toBe(same);
      if (same) unchanged++;
    }
    // The generator must reach both answers often, or the comparison proves little.
    expect(unchanged).toBeGreaterThan(40);
    expect(unchanged).toBeLessThan(360);
  });
});

/** The entries hold the same fields with the same values (order aside), stamps aside. */
function sameAsJson(a: SessionEntry, b: SessionEntry): boolean {
  const norm = (e: SessionEntry) => JSON.stringify(sortDeep(comparable(e as never)));
  return norm(a) === norm(b);
}

function sortDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortDeep);
  if (typeof v !== "object" || v === null) return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, sortDeep((v as Record<string, unknown>)[k])]),
  );
}
