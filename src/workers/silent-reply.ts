/** Replies that mean "say nothing" (OpenClaw's silent tokens): never delivered to a channel. */
const SILENT = new Set(["NO_REPLY", "REPLY_SKIP", "ANNOUNCE_SKIP"]);

export function isSilentReply(reply: string | undefined): boolean {
  const t = (reply ?? "").trim();
  return t === "" || SILENT.has(t.toUpperCase());
}
