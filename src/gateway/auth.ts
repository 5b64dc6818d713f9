/**
 * Bearer auth when a token is configured. Browsers cannot send a bearer header to Bull Board,
 * so Basic auth with the token as password is accepted too (the browser prompts for it).
 */
import { timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";

const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

function same(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const [scheme, value] = header.split(" ", 2);
  if (!value) return undefined;
  if (scheme?.toLowerCase() === "bearer") return value.trim();
  if (scheme?.toLowerCase() === "basic") {
    const decoded = Buffer.from(value, "base64").toString("utf8");
    return decoded.slice(decoded.indexOf(":") + 1);
  }
  return undefined;
}

export function createAuthHook(token: string | undefined) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!token) return;
    const path = req.url.split("?")[0] ?? "";
    if (OPEN_PATHS.has(path)) return;
    const given = presentedToken(req.headers.authorization);
    if (given && same(given, token)) return;
    if (path.startsWith("/admin") || path.startsWith("/docs")) void reply.header("www-authenticate", 'Basic realm="switchboard"');
    await reply.status(401).send({ ok: false, error: { code: "unauthorized", message: "missing or wrong bearer token" } });
  };
}
