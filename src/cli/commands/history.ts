import type { TranscriptMessage } from "../../history/transcript-types.js";
import { connect, type GlobalOptions } from "../client.js";
import { messageText, printJson } from "../output.js";

/** `switchboard history <sessionKey> [--limit N] [--json]` */
export async function historyCommand(
  sessionKey: string,
  opts: GlobalOptions & { json?: boolean; limit?: string },
): Promise<number> {
  const client = await connect(opts, "direct");
  try {
    const res = (await client.rpc("chat.history", {
      sessionKey,
      ...(opts.limit ? { limit: Number(opts.limit) } : {}),
    })) as {
      sessionKey: string;
      messages: TranscriptMessage[];
    };
    if (opts.json) {
      printJson(res);
      return 0;
    }
    if (res.messages.length === 0) process.stdout.write(`(no messages in ${res.sessionKey})\n`);
    for (const m of res.messages) {
      const when = m.timestamp ? new Date(m.timestamp).toISOString().replace("T", " ").slice(0, 19) : "";
      const from = m.provenance?.kind === "inter_session" ? ` ← ${m.provenance.sourceSessionKey}` : "";
      const text = messageText(m) || (m.stopReason === "error" ? `[error] ${String(m.errorMessage ?? "")}` : "");
      process.stdout.write(`[${when}] ${m.role}${from}: ${text}\n`);
    }
    return 0;
  } finally {
    await client.close();
  }
}
