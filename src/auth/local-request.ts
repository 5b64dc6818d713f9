/**
 * DNS-rebinding protection for listeners that run without a token (allowed only on a loopback
 * bind): the gateway (src/gateway/auth.ts) and `switchboard mcp --http` (src/mcp/transports.ts).
 *
 * Such a port is open to anything on this machine, including a web page whose host name an
 * attacker re-points at 127.0.0.1: the browser then sends the attacker's name as Host and the
 * attacker's page as Origin. So a token-less listener answers only requests addressed to a
 * loopback name and not sent by a page of another site.
 */
import type { IncomingHttpHeaders } from "node:http";

/** Host names that can only mean this machine (as a URL's `hostname` spells them). */
const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** `localhost`, `127.0.0.1` or `[::1]`, with a port or none; nothing else (no userinfo, no path). */
const LOOPBACK_HOST = /^(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$/i;

/**
 * Why a request must be refused on a token-less listener, or undefined when it may pass: its
 * Host is not a loopback name, or it carries an Origin that is not a loopback origin. The port
 * is not compared: a rebinding attack shows in the name, while an SSH tunnel
 * (`-L 9000:127.0.0.1:8787`) legitimately arrives naming another local port. Requests without
 * an Origin (curl, SDK clients, a browser's same-origin GET) pass; a browser always sends Host.
 */
export function nonLocalRequestReason(headers: IncomingHttpHeaders): string | undefined {
  const host = headers.host;
  if (!host || !LOOPBACK_HOST.test(host.trim()))
    return (
      `Host ${JSON.stringify(host ?? "")} is not a loopback name (localhost, 127.0.0.1, [::1]): ` +
      "without gateway.auth.token only requests addressed to one are answered " +
      "(a DNS-rebinding guard, not access control; set a token to use another name)"
    );
  const origin = headers.origin;
  if (origin !== undefined && !isLoopbackOrigin(origin))
    return (
      `Origin ${JSON.stringify(origin)} is not a loopback origin: without gateway.auth.token ` +
      "only pages served from localhost, 127.0.0.1 or [::1] may call"
    );
  return undefined;
}

function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // "null" (sandboxed frames, file://) and anything malformed
  }
  return (url.protocol === "http:" || url.protocol === "https:") && LOOPBACK_NAMES.has(url.hostname);
}
