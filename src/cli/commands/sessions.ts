import type { SessionEntry } from "../../session/session-entry.js";
import { ValidationError } from "../../errors/index.js";
import { connect, type GlobalOptions } from "../client.js";
import { positiveInt } from "../flags.js";
import { ago, printJson, printTable } from "../output.js";
import { updateProgress } from "../progress.js";

/** Rows per `sessions.list` call; `--all` keeps asking until a page comes back short. */
export const SESSIONS_PAGE = 200;

interface ListAnswer {
  count: number;
  sessions: SessionEntry[];
  nextOffset?: number;
}

/** `switchboard sessions [--json] [--active MIN] [--agent ID] [--limit N | --all]` */
export async function sessionsCommand(
  opts: GlobalOptions & { json?: boolean; active?: string; agent?: string; limit?: string; all?: boolean },
): Promise<number> {
  const limit = positiveInt("--limit", opts.limit);
  if (limit !== undefined && opts.all) throw new ValidationError("--limit and --all exclude each other");
  const active = positiveInt("--active", opts.active);
  const client = await connect(opts, "direct");
  try {
    const base = { ...(active ? { activeMinutes: active } : {}), ...(opts.agent ? { agentId: opts.agent } : {}) };
    // Pages of at most SESSIONS_PAGE rows until `limit` rows (or, with --all, every row) are in.
    const want = opts.all ? Infinity : (limit ?? SESSIONS_PAGE);
    const sessions: SessionEntry[] = [];
    let offset = 0;
    for (;;) {
      const page = Math.min(SESSIONS_PAGE, want - sessions.length);
      const res = (await client.rpc("sessions.list", {
        ...base,
        limit: page,
        ...(offset ? { offset } : {}),
      })) as ListAnswer;
      sessions.push(...res.sessions);
      updateProgress(`listing sessions… ${sessions.length} so far`);
      if (res.nextOffset === undefined || sessions.length >= want) break;
      offset = res.nextOffset;
    }
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
