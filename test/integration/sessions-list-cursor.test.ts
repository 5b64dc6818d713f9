/**
 * Listing sessions while they are updated: `sessions.list` pages by cursor (a position in the
 * index: score, then member), and `switchboard sessions --all` pages oldest first by it, so a
 * session updated during the listing is neither missed nor listed twice. Paging by offset over
 * the newest-first index did both: an update moved a session to the front and shifted every
 * later page by one. Also: ties (many sessions updated in the same millisecond) across page
 * boundaries, the filters, the old offset paging still answered, and bad cursors refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { sessionsCommand } from "../../src/cli/commands/sessions.js";
import { SessionStore } from "../../src/storage/session-store.js";
import type { SessionEntry } from "../../src/session/session-entry.js";
import { newRedis } from "../helpers/context.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

let sys: TestSystem;
let writerRedis: Redis;
let writer: SessionStore;

beforeAll(async () => {
  // No workers: only this file's writer changes sessions.
  sys = await startTestSystem({}, { gateway: true, workers: false });
  // Its own connection, as another gateway's inbound traffic would be.
  writerRedis = newRedis();
  writer = new SessionStore(writerRedis, sys.config.redis.prefix);
});

afterAll(async () => {
  writerRedis?.disconnect();
  await sys?.close();
});

const keyOf = (agent: string, i: number) => `agent:${agent}:s${String(i).padStart(5, "0")}`;

/** `n` sessions of `agent`, the i-th updated at `at(i)`. */
async function seed(agent: string, n: number, at: (i: number) => number): Promise<void> {
  for (let i = 0; i < n; i += 200)
    await Promise.all(
      Array.from({ length: Math.min(200, n - i) }, (_, j) =>
        sys.svc.sessions.upsert(
          keyOf(agent, i + j),
          { agentId: agent, kind: "other" },
          { sessionId: `${agent}-${i + j}` },
          { now: at(i + j) },
        ),
      ),
    );
}

/** Touches the sessions oldest first, one after another (as inbound messages would), until stopped. */
function touchOldestFirst(agent: string, n: number): { touched: () => number; stop: () => Promise<number> } {
  let stop = false;
  let touched = 0;
  const done = (async () => {
    for (let i = 0; !stop; i = (i + 1) % n) {
      await writer.upsert(keyOf(agent, i), { agentId: agent, kind: "other" }, {}, { activity: "touch" });
      touched++;
    }
  })();
  return {
    touched: () => touched,
    stop: async () => {
      stop = true;
      await done;
      return touched;
    },
  };
}

/** `switchboard sessions --json …` in this process, through the gateway: what it printed. */
async function cliSessions(extra: Record<string, unknown>): Promise<{ count: number; sessions: SessionEntry[] }> {
  const out: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    out.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    expect(await sessionsCommand({ url: sys.url, json: true, ...extra })).toBe(0);
  } finally {
    process.stdout.write = write;
  }
  return JSON.parse(out.join("")) as { count: number; sessions: SessionEntry[] };
}

interface Page {
  count: number;
  sessions: SessionEntry[];
  nextCursor?: string;
  nextOffset?: number;
}

/** Every page of a cursor listing, with `params`, `limit` rows at a time. */
async function allPages(params: Record<string, unknown>, limit: number): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = (await sys.rpc("sessions.list", { ...params, limit, ...(cursor ? { cursor } : {}) })) as Page;
    keys.push(...page.sessions.map((s) => s.key));
    cursor = page.nextCursor;
    pages++;
  } while (cursor);
  return { keys, pages };
}

const dupes = (keys: string[]) => keys.filter((k, i) => keys.indexOf(k) !== i);

describe("switchboard sessions --all while sessions are updated", () => {
  const N = 3000;

  beforeAll(async () => {
    const t0 = Date.now() - N * 1000;
    await seed("live", N, (i) => t0 + i * 1000);
  }, 60_000);

  it("lists every session once, newest first, while a writer touches the oldest ones", async () => {
    const touching = touchOldestFirst("live", N);
    try {
      await settle(() => touching.touched() >= 20, { what: "the writer under way", timeoutMs: 10_000 });
      const before = touching.touched();
      const listed = await cliSessions({ all: true, agent: "live" });
      // The listing ran while sessions moved (not before or after it).
      expect(touching.touched()).toBeGreaterThan(before);
      const keys = listed.sessions.map((s) => s.key);
      expect(dupes(keys)).toEqual([]);
      expect(new Set(keys).size).toBe(N);
      expect(listed.count).toBe(N);
      const times = listed.sessions.map((s) => s.updatedAt);
      expect(times).toEqual([...times].sort((a, b) => b - a));
    } finally {
      await touching.stop();
    }
  }, 60_000);

  it("sessions.list oldest first by cursor meets every session while they are touched; none is lost", async () => {
    const touching = touchOldestFirst("live", N);
    try {
      await settle(() => touching.touched() >= 20, { what: "the writer under way", timeoutMs: 10_000 });
      const { keys, pages } = await allPages({ agentId: "live", order: "oldest" }, 100);
      expect(pages).toBeGreaterThan(N / 100 - 1);
      // Met again at its new place is allowed (not a snapshot); missing is not.
      expect(new Set(keys).size).toBe(N);
    } finally {
      await touching.stop();
    }
  }, 60_000);

  it("--limit N: the N most recently updated, newest first, in pages of 200", async () => {
    const listed = await cliSessions({ limit: "450", agent: "live" });
    expect(listed.count).toBe(450);
    const newest = await sys.svc.sessions.list({ agentId: "live", limit: 450 });
    expect(listed.sessions.map((s) => s.key)).toEqual(newest.map((s) => s.key));
  });
});

describe("sessions.list by cursor", () => {
  it("pages through sessions updated in the same millisecond without missing or repeating one", async () => {
    const same = Date.now() - 60_000;
    await seed("ties", 450, () => same);
    const expected = Array.from({ length: 450 }, (_, i) => keyOf("ties", i)); // byte order = Redis's
    const oldest = await allPages({ agentId: "ties", order: "oldest" }, 100);
    expect(oldest.keys).toEqual(expected);
    const newest = await allPages({ agentId: "ties", order: "newest" }, 100);
    expect(newest.keys).toEqual([...expected].reverse());
    // Pages smaller than a tie group, over the whole index (no agent filter), with reserved keys left out.
    const everything = await allPages({ order: "oldest" }, 7);
    expect(everything.keys.filter((k) => k.startsWith("agent:ties:"))).toEqual(expected);
    expect(dupes(everything.keys)).toEqual([]);
  }, 60_000);

  it("rows added or removed between pages shift nothing", async () => {
    const t0 = Date.now() - 3_600_000;
    await seed("shift", 300, (i) => t0 + i * 1000);
    const first = (await sys.rpc("sessions.list", { agentId: "shift", order: "newest", limit: 100 })) as Page;
    expect(first.nextCursor).toEqual(expect.any(String));
    // A new session (newest of all) and the newest one deleted: by offset, the next page would start one off.
    await sys.svc.sessions.upsert("agent:shift:late", { agentId: "shift", kind: "other" }, { sessionId: "late" });
    await sys.svc.sessions.delete(keyOf("shift", 299), "shift", "other");
    const second = (await sys.rpc("sessions.list", {
      agentId: "shift",
      order: "newest",
      limit: 100,
      cursor: first.nextCursor,
    })) as Page;
    expect(second.sessions.map((s) => s.key)).toEqual(Array.from({ length: 100 }, (_, i) => keyOf("shift", 199 - i)));
  });

  it("filters: activity window, kinds, search; the last page has no nextCursor", async () => {
    const now = Date.now();
    await seed("filt", 50, (i) => (i < 20 ? now - 3 * 3_600_000 + i : now - 60_000 + i));
    const active = await allPages({ agentId: "filt", activeMinutes: 30, order: "oldest" }, 7);
    expect(active.keys).toEqual(Array.from({ length: 30 }, (_, i) => keyOf("filt", 20 + i)));
    const searched = await allPages({ search: "agent:filt:s0004", order: "newest" }, 3);
    expect(searched.keys).toEqual(Array.from({ length: 10 }, (_, i) => keyOf("filt", 49 - i)));
    const kinds = await allPages({ kinds: ["other", "cron"], agentId: "filt", order: "oldest" }, 9);
    expect(kinds.keys).toHaveLength(50);
    const last = (await sys.rpc("sessions.list", { agentId: "filt", order: "oldest", limit: 50 })) as Page;
    expect(last.sessions).toHaveLength(50);
    expect(last.nextCursor).toBeUndefined();
  });

  it("children of a session page by cursor too", async () => {
    const parent = "agent:kids:main";
    await sys.svc.sessions.upsert(parent, { agentId: "kids", kind: "main" }, { sessionId: "kids-main" });
    const t0 = Date.now() - 10_000;
    for (let i = 0; i < 5; i++)
      await sys.svc.sessions.upsert(
        keyOf("kids", i),
        { agentId: "kids", kind: "other" },
        { sessionId: `kid-${i}`, spawnedBy: parent },
        { now: t0 + i },
      );
    const kids = await allPages({ spawnedBy: parent, order: "oldest" }, 2);
    expect(kids.keys).toEqual(Array.from({ length: 5 }, (_, i) => keyOf("kids", i)));
  });

  it("offset paging still answers (older clients); offset with a cursor, or a made-up cursor, is refused", async () => {
    const t0 = Date.now() - 7_200_000;
    await seed("old", 250, (i) => t0 + i * 1000);
    const p1 = (await sys.rpc("sessions.list", { agentId: "old", limit: 200 })) as Page;
    expect(p1.nextOffset).toBe(200);
    const p2 = (await sys.rpc("sessions.list", { agentId: "old", limit: 200, offset: 200 })) as Page;
    expect(p2.sessions).toHaveLength(50);
    expect(p2.nextOffset).toBeUndefined();

    const bad = async (params: Record<string, unknown>) =>
      (await sys.post("/v1/rpc/sessions.list", params)).body as {
        ok: boolean;
        error: { code: string; message: string };
      };
    expect(await bad({ order: "oldest", offset: 10 })).toMatchObject({
      ok: false,
      error: { code: "invalid_request", message: expect.stringContaining("offset does not combine") },
    });
    for (const cursor of ["not a cursor", Buffer.from('["x"]').toString("base64url"), "AAAA"])
      expect(await bad({ cursor })).toMatchObject({ ok: false, error: { code: "invalid_request" } });
  });
});
