/**
 * The effective sendPolicy of a stored session: its own override, else the config rules
 * matched against what the entry records (channel, chat type) and the key itself.
 */
import type { Config } from "../config/schema.js";
import { resolveSendPolicy } from "./send-policy.js";
import type { SessionEntry } from "./session-entry.js";

export function sessionSendPolicy(
  config: Config,
  sessionKey: string,
  entry: Pick<SessionEntry, "sendPolicy" | "channel" | "chatType"> | null | undefined,
  at: { channel?: string; chatType?: string } = {},
): "allow" | "deny" {
  return resolveSendPolicy(config, {
    sessionKey,
    ...(at.channel ? { channel: at.channel } : {}),
    ...(at.chatType ? { chatType: at.chatType } : {}),
    ...(entry
      ? {
          entry: {
            ...(entry.sendPolicy ? { sendPolicy: entry.sendPolicy } : {}),
            ...(entry.channel ? { channel: entry.channel } : {}),
            ...(entry.chatType ? { chatType: entry.chatType } : {}),
          },
        }
      : {}),
  });
}
