/**
 * Which chat a delivery goes to, as the name of its delivery lane (docs/concepts/reliability.md,
 * "Replies reach a chat in order"): the channel, the account, the recipient and the thread.
 * Pure: no I/O.
 */
import { createHash } from "node:crypto";
import type { ChannelConfig } from "../config/schema.js";
import type { DeliveryRoute } from "../session/stored-route.js";

/**
 * `<channel>:<32 hex digits>`: readable by channel in Redis, and bounded whatever the recipient
 * or thread id holds. Two routes share a lane exactly when all four parts are equal.
 */
export function laneIdOf(route: DeliveryRoute): string {
  const parts = JSON.stringify([route.channel, route.accountId ?? "", route.to ?? "", route.threadId ?? ""]);
  return `${route.channel}:${createHash("sha256").update(parts).digest("hex").slice(0, 32)}`;
}

/**
 * The lane of a delivery through `channel`, or undefined when order cannot matter: no adapter
 * (nothing is sent) or a `log` channel (it only records; nobody reads it as a chat).
 */
export function deliveryLaneId(channel: ChannelConfig | undefined, route: DeliveryRoute): string | undefined {
  return channel && channel.kind !== "log" ? laneIdOf(route) : undefined;
}
