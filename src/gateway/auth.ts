/**
 * Bearer auth when a token is configured (header parsing: src/auth/credentials.ts). `/healthz`
 * and `/readyz` stay open for load balancers and orchestrators.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { tokenAccepted } from "../auth/credentials.js";

const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

export function createAuthHook(token: string | undefined) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!token) return;
    const path = req.url.split("?")[0] ?? "";
    if (OPEN_PATHS.has(path)) return;
    if (tokenAccepted(req.headers.authorization, token)) return;
    if (path.startsWith("/admin") || path.startsWith("/docs"))
      void reply.header("www-authenticate", 'Basic realm="switchboard"');
    await reply
      .status(401)
      .send({ ok: false, error: { code: "unauthorized", message: "missing or wrong bearer token" } });
  };
}
