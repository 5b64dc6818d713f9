/**
 * Bearer auth when a token is configured (header parsing: src/auth/credentials.ts). `/healthz`
 * and `/readyz` stay open for load balancers and orchestrators.
 *
 * Without a token (allowed only on a loopback bind), requests naming a foreign Host or sent from
 * a foreign Origin are refused instead (DNS rebinding, src/auth/local-request.ts).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { tokenAccepted } from "../auth/credentials.js";
import { nonLocalRequestReason } from "../auth/local-request.js";

const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

export function createAuthHook(token: string | undefined) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const path = req.url.split("?")[0] ?? "";
    if (OPEN_PATHS.has(path)) return;
    if (!token) {
      const reason = nonLocalRequestReason(req.headers);
      if (reason) await reply.status(403).send({ ok: false, error: { code: "forbidden", message: reason } });
      return;
    }
    if (tokenAccepted(req.headers.authorization, token)) return;
    if (path.startsWith("/admin") || path.startsWith("/docs"))
      void reply.header("www-authenticate", 'Basic realm="switchboard"');
    await reply
      .status(401)
      .send({ ok: false, error: { code: "unauthorized", message: "missing or wrong bearer token" } });
  };
}
