import type { SessionEntry } from "../../storage/session-entry.js";
import { connect, type GlobalOptions } from "../client.js";
import { ago, printJson, printTable } from "../output.js";

/** `switchboard sessions [--json] [--active MIN] [--agent ID] [--limit N]` */
export async function sessionsCommand(opts: GlobalOptions & { json?: boolean; active?: string; agent?: string; limit?: string }): Promise<number> {
  const client = await connect(opts, "direct");
  try {
    const params = {
      ...(opts.active ? { activeMinutes: Number(opts.active) } : {}),
      ...(opts.agent ? { agentId: opts.agent } : {}),
      limit: opts.limit ? Number(opts.limit) : 200,
    };
    const res = (await client.rpc("sessions.list", params)) as { count: number; sessions: SessionEntry[] };
    if (opts.json) printJson(res);
    else
      printTable(
        res.sessions.map((s) => ({ key: s.key, kind: s.kind, channel: s.channel ?? s.lastChannel ?? "", updated: ago(s.updatedAt), sessionId: s.sessionId, tokens: s.totalTokens ?? 0 })),
        ["key", "kind", "channel", "updated", "sessionId", "tokens"],
      );
    return 0;
  } finally {
    await client.close();
  }
}
