/**
 * Reading a token from an Authorization header, shared by every door that takes one (the HTTP
 * gateway, the MCP server's HTTP transport). Bearer, or Basic with the token as password:
 * browsers cannot send a bearer header to Bull Board, so they prompt for Basic instead.
 *
 * The header is parsed strictly (HTTP's `credentials = auth-scheme 1*SP token68`): a scheme in
 * any letter case, one or more spaces, then exactly one credential and nothing after it. So
 * `Bearer <token> extra`, a tab instead of a space, or a Basic credential that is not
 * `user:password` in base64 are refused instead of being read leniently; a proxy or client that
 * mangles the header gets a 401 rather than access by accident.
 */
import { timingSafeEqual } from "node:crypto";

/**
 * `<scheme> <credential>`, nothing before or after; outer spaces are already gone in Node. The
 * credential is visible ASCII, as every token is (config/schema.ts): Node reads header bytes as
 * Latin-1, so anything else in it is a token's UTF-8 read wrong, which no token could match.
 */
const CREDENTIALS_RE = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +([\x21-\x7e]+)$/;
/** Standard base64 with its padding, as browsers send Basic credentials. */
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function same(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/**
 * The token a request presents, or undefined when the header is missing or malformed:
 * `Bearer <token>`, or `Basic base64(<user>:<token>)` (any user, possibly empty, but the `:`
 * must be there). The scheme is case-insensitive, the credential is not.
 */
export function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = CREDENTIALS_RE.exec(header.replace(/^ +| +$/g, ""));
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase();
  const credential = m[2]!;
  if (scheme === "bearer") return credential;
  if (scheme === "basic") {
    if (!BASE64_RE.test(credential)) return undefined;
    const decoded = Buffer.from(credential, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return undefined;
    return decoded.slice(colon + 1);
  }
  return undefined;
}

/** Whether an Authorization header (Bearer, or Basic with the token as password) carries `token`. */
export function tokenAccepted(header: string | undefined, token: string): boolean {
  const given = presentedToken(header);
  return given !== undefined && same(given, token);
}
