import { createHash } from "node:crypto";

/**
 * A stable RFC-4122-shaped id from a string. Retries must land on the same run: idempotency
 * keys, inbound messageIds, the steps of a flow and the sends of a re-run turn all derive their
 * runIds with this.
 */
export function uuidFrom(s: string): string {
  const h = createHash("sha256").update(s).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
