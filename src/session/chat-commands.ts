/**
 * Standalone chat commands an inbound message can be (besides the reset triggers): `/send`,
 * `/status`, `/stop`. The command must be the whole message (after trimming); matching is
 * case-insensitive; a Telegram-style bot suffix (`/status@my_bot`) is accepted. Pure: no I/O.
 */

export type ChatCommand =
  /** `/send on|off|inherit`: the session's sendPolicy override; null clears it (inherit). */
  | { kind: "send"; value: "allow" | "deny" | null }
  | { kind: "send"; error: string }
  | { kind: "status" }
  /** `/tools`: the session tools this session may call (its effective tool profile). */
  | { kind: "tools" }
  | { kind: "stop" };

export const SEND_USAGE = "Usage: /send on|off|inherit";

const SEND_VALUES: Record<string, "allow" | "deny" | null> = {
  on: "allow",
  allow: "allow",
  off: "deny",
  deny: "deny",
  inherit: null,
  default: null,
  reset: null,
  clear: null,
};

const COMMAND_RE = /^\/(send|status|stop|tools)(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/i;

/** Parse `text` as a chat command; null when it is not one (then it is an ordinary message). */
export function parseChatCommand(text: string): ChatCommand | null {
  const m = COMMAND_RE.exec(text.trim());
  if (!m) return null;
  const name = (m[1] ?? "").toLowerCase();
  const arg = (m[2] ?? "").trim();
  if (name === "status") return arg ? null : { kind: "status" };
  if (name === "stop") return arg ? null : { kind: "stop" };
  if (name === "tools") return arg ? null : { kind: "tools" };
  // /send
  if (!arg) return { kind: "send", error: `Missing argument. ${SEND_USAGE}` };
  const key = arg.toLowerCase();
  if (!Object.hasOwn(SEND_VALUES, key)) {
    return { kind: "send", error: `Unknown /send argument "${arg}". ${SEND_USAGE}` };
  }
  return { kind: "send", value: SEND_VALUES[key] ?? null };
}
