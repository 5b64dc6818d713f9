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
  nextOffset?: number;
}

/** Newest first, as the index orders them (equal times: the greater key first). */
function newestFirst(a: SessionEntry, b: SessionEntry): number {
  return b.updatedAt - a.updatedAt || Buffer.compare(Buffer.from(b.key), Buffer.from(a.key));
}

/**
 * Whether `err` is a gateway of an earlier release refusing the cursor paging params (its
 * `sessions.list` takes no `order` or `cursor`: "Unrecognized key: "order"").
 */
export function refusesCursorPaging(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === "invalid_request" && typeof message === "string" && /"(order|cursor)"/.test(message);
}

export const OFFSET_PAGING_WARNING =
  "warning: the gateway does not page sessions by cursor (an earlier release): listing by offset, " +
  "which may miss or repeat sessions updated meanwhile";

/**
 * `switchboard sessions [--json] [--active MIN] [--agent ID] [--limit N | --all]`
 *
 * Pages by cursor (a position in the index), not by offset: a session updated during the listing
 * moved to the front and shifted every later page by one, so rows came twice or never. `--all`
 * pages oldest first, where an update moves a session ahead, to where the listing still goes: every
 * session that exists throughout is listed. Not a snapshot: one updated after its page was read is
 * met again at its new place; it is shown once (as last read), and the whole list newest first.
 *
 * A listing of one page asks without `order`, as earlier releases did, so that a gateway of one
 * still answers it (its params are strict: an unknown key is refused). A longer one that such a
 * gateway refuses is paged by offset instead, newest first, with a warning.
 */
export async function sessionsCommand(
  opts: GlobalOptions & { json?: boolean; active?: string; agent?: string; limit?: string; all?: boolean },
): Promise<number> {
  const limit = positiveInt("--limit", opts.limit);
  if (limit !== undefined && opts.all) throw new UsageError("--limit and --all exclude each other");
  const active = positiveInt("--active", opts.active);
  const client = await connect(opts, "direct", "read");
  try {
    const filters = {
      ...(active ? { activeMinutes: active } : {}),
      ...(opts.agent ? { agentId: opts.agent } : {}),
    };
    const want = opts.all ? Number.POSITIVE_INFINITY : (limit ?? SESSIONS_PAGE);
    const list = async (byCursor: boolean) => {
      // By key: a session met again (updated meanwhile) replaces what was read of it before.
      const byKey = new Map<string, SessionEntry>();
      const base = { ...filters, ...(byCursor ? { order: opts.all ? "oldest" : "newest" } : {}) };
      let next: { cursor: string } | { offset: number } | undefined;
      for (;;) {
        const page = opts.all ? ALL_PAGE : Math.min(SESSIONS_PAGE, want - byKey.size);
        const res = (await client.rpc("sessions.list", { ...base, limit: page, ...next })) as ListAnswer;
        for (const s of res.sessions) {
          byKey.delete(s.key);
          byKey.set(s.key, s);
        }
        updateProgress(`listing sessions… ${byKey.size} so far`);
        // A page of shown rows can come back short of its rows (global, unknown): then on by offset.
        next =
          res.nextCursor !== undefined
            ? { cursor: res.nextCursor }
            : res.nextOffset !== undefined
              ? { offset: res.nextOffset }
              : undefined;
        if (next === undefined || byKey.size >= want) return byKey;
      }
    };
    let byKey: Map<string, SessionEntry>;
    if (opts.all || want > SESSIONS_PAGE) {
      try {
        byKey = await list(true);
      } catch (err) {
        if (!refusesCursorPaging(err)) throw err;
        process.stderr.write(`${OFFSET_PAGING_WARNING}\n`);
        byKey = await list(false);
      }
    } else byKey = await list(false);
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
