import type { TranscriptEntry, TranscriptMessage } from "../../history/transcript-types.js";
import { topicOpt } from "../../session/transcript-topic.js";
import { readLastEntries } from "../../transcript/tail-reader.js";
import { type Client, connect, type GlobalOptions } from "../client.js";
import { positiveInt } from "../flags.js";
import { messageText, printJson, terminalSafe } from "../output.js";
import { CHAT_HISTORY_MAX } from "../../rpc/params.js";

/** Printed in place of a time no Date can hold (an imported `timestamp: 1e20`) or that is missing. */
export const UNKNOWN_TIME = "????-??-?? ??:??:??";

/** `YYYY-MM-DD HH:MM:SS` (UTC) of the first of `candidates` a Date can hold, else undefined. */
export function formatWhen(...candidates: unknown[]): string | undefined {
  for (const value of candidates) {
    if (typeof value !== "number" && typeof value !== "string") continue;
    if (value === "") continue;
    const date = new Date(value);
    if (!Number.isNaN(date.getTime())) return date.toISOString().replace("T", " ").slice(0, 19);
  }
  return undefined;
}

/**
 * The lines' own timestamps of `messages`, when this CLI reads Redis directly (chat.history returns
 * messages only, and an imported message may carry no time, or one no Date can hold). Read again
 * after the RPC, so a line is used only when its message is the one the RPC returned at that place.
 */
async function lineTimestamps(
  client: Client,
  sessionKey: string,
  messages: TranscriptMessage[],
): Promise<(string | undefined)[] | undefined> {
  const svc = client.core;
  if (!svc || messages.every((m) => formatWhen(m.timestamp) !== undefined)) return undefined;
  const entry = await svc.sessions.get(sessionKey);
  if (!entry) return undefined;
  const file = svc.transcripts.path(entry.agentId, entry.sessionId, topicOpt(entry.key).topicId);
  const entries: TranscriptEntry[] = await readLastEntries(file, messages.length, {
    filter: (e) => e.type === "message" && typeof e.message === "object" && e.message !== null,
  });
  if (entries.length !== messages.length) return undefined;
  return entries.map((e, i) => {
    const m = messages[i];
    if (formatWhen(m?.timestamp) !== undefined || typeof e.timestamp !== "string") return undefined;
    return JSON.stringify(e.message) === JSON.stringify(m) ? e.timestamp : undefined;
  });
}

/** `switchboard history <sessionKey> [--limit N] [--json]` */
export async function historyCommand(
  sessionKey: string,
  opts: GlobalOptions & { json?: boolean; limit?: string },
): Promise<number> {
  // Refused here, by the flag's name, before Redis is asked (the RPC's own message names params).
  const limit = positiveInt("--limit", opts.limit, CHAT_HISTORY_MAX);
  const client = await connect(opts, "direct", "read");
  try {
    const res = (await client.rpc("chat.history", { sessionKey, ...(limit ? { limit } : {}) })) as {
      sessionKey: string;
      messages: TranscriptMessage[];
    };
    if (opts.json) {
      printJson(res);
      return 0;
    }
    if (res.messages.length === 0) process.stdout.write(`(no messages in ${res.sessionKey})\n`);
    // The line's own timestamp stands in for a message's missing or impossible one.
    const lineTimes = await lineTimestamps(client, res.sessionKey, res.messages).catch(() => undefined);
    res.messages.forEach((m, i) => {
      const when = formatWhen(m.timestamp, lineTimes?.[i]) ?? UNKNOWN_TIME;
      const from = m.provenance?.kind === "inter_session" ? ` ← ${m.provenance.sourceSessionKey}` : "";
      const text = messageText(m) || (m.stopReason === "error" ? `[error] ${String(m.errorMessage ?? "")}` : "");
      process.stdout.write(`${terminalSafe(`[${when}] ${m.role}${from}: ${text}`)}\n`);
    });
    return 0;
  } finally {
    await client.close();
  }
}
