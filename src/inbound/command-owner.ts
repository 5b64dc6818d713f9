/**
 * Who may run owner-only chat commands (`/send on|off|inherit`). A sender is an owner only when
 * `commands.ownerAllowFrom` lists it, as `channel:id` or a bare `id` (any channel). A wildcard
 * never makes anyone an owner (OpenClaw fixed exactly that hole: a `"*"` allowlist let any group
 * member mute the group's session), and with no owner list nobody in a chat is an owner —
 * operators change the policy with `sessions.patch` over the authenticated API instead.
 * Pure: no I/O. Ids are compared case-insensitively after trimming, as channels spell them.
 */
import type { Config } from "../config/schema.js";

export const OWNER_ONLY_REPLY = "Only an owner can change /send here (commands.ownerAllowFrom).";

export function isCommandOwner(config: Pick<Config, "commands">, sender: { channel: string; from: string }): boolean {
  const from = sender.from.trim().toLowerCase();
  const channel = sender.channel.trim().toLowerCase();
  if (!from) return false;
  for (const raw of config.commands.ownerAllowFrom) {
    const entry = raw.trim().toLowerCase();
    if (!entry || entry.includes("*")) continue;
    const sep = entry.indexOf(":");
    if (sep === -1) {
      if (entry === from) return true;
    } else if (entry.slice(0, sep) === channel && entry.slice(sep + 1) === from) {
      return true;
    }
  }
  return false;
}
