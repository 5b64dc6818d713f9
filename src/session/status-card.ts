/** The `/status` card (and session_status text): what a person wants to know at a glance. */
import type { SessionEntry } from "./session-entry.js";

export function statusCard(
  entry: SessionEntry | null,
  extra: { queueDepth: number; running: boolean; sendPolicy: string; model?: string },
): string {
  if (!entry) return "Switchboard status\nNo session yet: the next message starts one.";
  const tokens = entry.totalTokens ?? 0;
  return [
    "Switchboard status",
    `🧠 Model: ${entry.modelOverride ?? extra.model ?? entry.model ?? "default"}`,
    `🗝 Session: ${entry.key} (${entry.sessionId})`,
    `🕒 Updated: ${new Date(entry.updatedAt).toISOString()}`,
    `📊 Tokens: ${tokens} (in ${entry.inputTokens ?? 0} / out ${entry.outputTokens ?? 0})`,
    `📬 Queue: ${extra.queueDepth} waiting${extra.running ? ", 1 running" : ""}`,
    `✉️ Send policy: ${extra.sendPolicy}${entry.sendPolicy ? " (session override)" : ""}`,
  ].join("\n");
}
