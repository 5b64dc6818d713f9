import type { SessionEntry } from "../../session/session-entry.js";
import { connect, type GlobalOptions } from "../client.js";
import { positiveInt, UsageError } from "../flags.js";
import { ago, printJson, printTable } from "../output.js";
import { updateProgress } from "../progress.js";

/** Rows per `sessions.list` call for `--limit` (and the default listing). */
export const SESSIONS_PAGE = 200;
/** Rows per call for `--all`: each page costs O(its rows) (by cursor), so fewer round trips. */
const ALL_PAGE = 1000;

interface ListAnswer {
  count: number;
  sessions: SessionEntry[];
  nextCursor?: string;
}

/** Newest first, as the index orders them (equal times: the greater key first). */
function newestFirst(a: SessionEntry, b: SessionEntry): number {
  return b.updatedAt - a.updatedAt || Buffer.compare(Buffer.from(b.key), Buffer.from(a.key));
}

/**
 * `switchboard sessions [--json] [--active MIN] [--agent ID] [--limit N | --all]`
 *
 * Pages by cursor (a position in the index), not by offset: a session updated during the listing
 * moved to the front and shifted every later page by one, so rows came twice or never. `--all`
 * pages oldest first, where an update moves a session ahead, to where the listing still goes: every
 * session that exists throughout is listed. Not a snapshot: one updated after its page was read is
 * met again at its new place; it is shown once (as last read), and the whole list newest first.
 */
export async function sessionsCommand(
  opts: GlobalOptions & { json?: boolean; active?: string; agent?: string; limit?: string; all?: boolean },
): Promise<number> {
  const limit = positiveInt("--limit", opts.limit);
  if (limit !== undefined && opts.all) throw new UsageError("--limit and --all exclude each other");
  const active = positiveInt("--active", opts.active);
  const client = await connect(opts, "direct");
  try {
    const base = {
      ...(active ? { activeMinutes: active } : {}),
      ...(opts.agent ? { agentId: opts.agent } : {}),
      order: opts.all ? "oldest" : "newest",
    };
    const want = opts.all ? Number.POSITIVE_INFINITY : (limit ?? SESSIONS_PAGE);
    // By key: a session met again (updated meanwhile) replaces what was read of it before.
    const byKey = new Map<string, SessionEntry>();
    let cursor: string | undefined;
    for (;;) {
      const page = opts.all ? ALL_PAGE : Math.min(SESSIONS_PAGE, want - byKey.size);
      const res = (await client.rpc("sessions.list", {
        ...base,
        limit: page,
        ...(cursor ? { cursor } : {}),
      })) as ListAnswer;
      for (const s of res.sessions) {
        byKey.delete(s.key);
        byKey.set(s.key, s);
      }
      updateProgress(`listing sessions… ${byKey.size} so far`);
      if (res.nextCursor === undefined || byKey.size >= want) break;
      cursor = res.nextCursor;
    }
    const sessions = [...byKey.values()].sort(newestFirst).slice(0, want);
    if (opts.json) printJson({ count: sessions.length, sessions });
    else
      printTable(
        sessions.map((s) => ({
          key: s.key,
          kind: s.kind,
          channel: s.channel ?? s.lastChannel ?? "",
          updated: ago(s.updatedAt),
          sessionId: s.sessionId,
          tokens: s.totalTokens ?? 0,
        })),
        ["key", "kind", "channel", "updated", "sessionId", "tokens"],
      );
    return 0;
  } finally {
    await client.close();
  }
}
