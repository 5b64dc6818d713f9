/**
 * A gateway's copy of recently used session entries, kept as the exact JSON Redis stores, so
 * the accept path (`agent` RPC) needs no read before its push: the push itself checks that the
 * stored entry is still that text (turn-push.lua) and, if it is not, hands back the current one.
 * A stale copy therefore costs one more round trip, never a wrong decision: every change of an
 * entry (session-upsert.lua bumps `rev`, a delete removes it) makes the texts differ.
 *
 * One cache per process's dependency set (per process), bounded; oldest-used entries go first.
 */
import { type KnownEntry, knownFrom } from "../session/session-entry.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";

/** What reading an entry on a cache miss needs; the object also identifies the process's cache. */
export interface EntryCacheDeps {
  redis: RedisClient;
  keys: RedisKeys;
}

const MAX_ENTRIES = 10_000;

export type { KnownEntry };

export class SessionEntryCache {
  private readonly map = new Map<string, KnownEntry>();

  constructor(private readonly max = MAX_ENTRIES) {}

  get(sessionKey: string): KnownEntry | undefined {
    const hit = this.map.get(sessionKey);
    if (hit) {
      // Most recently used last: Map keeps insertion order.
      this.map.delete(sessionKey);
      this.map.set(sessionKey, hit);
    }
    return hit;
  }

  /** Remember `raw` (null forgets the session). Returns the decoded entry. */
  set(sessionKey: string, raw: string | null): KnownEntry | null {
    this.map.delete(sessionKey);
    const known = knownFrom(raw);
    if (known === null) return null;
    this.map.set(sessionKey, known);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
    return known;
  }

  get size(): number {
    return this.map.size;
  }
}

const caches = new WeakMap<EntryCacheDeps, SessionEntryCache>();

export function entryCache(svc: EntryCacheDeps): SessionEntryCache {
  let c = caches.get(svc);
  if (!c) caches.set(svc, (c = new SessionEntryCache()));
  return c;
}

/** The session's entry from the cache, else read (and cached); null when it does not exist. */
export async function knownEntry(svc: EntryCacheDeps, sessionKey: string): Promise<KnownEntry | null> {
  const cache = entryCache(svc);
  return cache.get(sessionKey) ?? cache.set(sessionKey, await svc.redis.get(svc.keys.session(sessionKey)));
}
