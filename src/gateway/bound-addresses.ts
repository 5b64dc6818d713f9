/**
 * What the gateway really listens on, for the start-up log. Fastify's `listen()` answers with a
 * URL to connect to (`http://127.0.0.1:p` when bound to 0.0.0.0), which hides a wildcard bind;
 * operators need to see the bound address and the real port (port 0 picks one at start-up).
 */
import type { AddressInfo } from "node:net";

/** `0.0.0.0:8787`, `[::1]:8787`, or a socket path: every address the server listens on, in order. */
export function formatBoundAddresses(addresses: readonly (AddressInfo | string)[]): string {
  return addresses
    .map((a) =>
      typeof a === "string" ? a : a.address.includes(":") ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`,
    )
    .join(", ");
}
