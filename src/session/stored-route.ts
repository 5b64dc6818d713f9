/**
 * Where a session's outbound messages go, from what is stored: its delivery context (kept by
 * inbound messages only: inter-session traffic never overwrites it), else the mirrored `last*`
 * fields, else what the key itself names (`…:telegram:group:-100:topic:9`).
 */
import { announceTargetFromKey } from "./key-classify.js";
import type { SessionEntry } from "./session-entry.js";

/** Where one outbound message goes: a channel and, within it, a recipient, account and thread. */
export interface DeliveryRoute {
  channel: string;
  to?: string;
  accountId?: string;
  threadId?: string;
}

export function storedRoute(sessionKey: string, entry: SessionEntry | null | undefined): DeliveryRoute | undefined {
  const dc = entry?.deliveryContext;
  if (dc?.channel) {
    return {
      channel: dc.channel,
      ...(dc.to ? { to: dc.to } : {}),
      ...(dc.accountId ? { accountId: dc.accountId } : {}),
      ...(dc.threadId ? { threadId: dc.threadId } : {}),
    };
  }
  if (entry?.lastChannel) {
    return {
      channel: entry.lastChannel,
      ...(entry.lastTo ? { to: entry.lastTo } : {}),
      ...(entry.lastAccountId ? { accountId: entry.lastAccountId } : {}),
      ...(entry.lastThreadId ? { threadId: entry.lastThreadId } : {}),
    };
  }
  const fromKey = announceTargetFromKey(sessionKey);
  return fromKey
    ? {
        channel: fromKey.channel,
        to: fromKey.to,
        ...(fromKey.accountId ? { accountId: fromKey.accountId } : {}),
        ...(fromKey.threadId ? { threadId: fromKey.threadId } : {}),
      }
    : undefined;
}
