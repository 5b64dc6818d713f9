/**
 * The API reference: `GET /openapi.json` (generated from the zod schemas) and Swagger UI at
 * `/docs`, served from the installed package (no CDN, works offline). Behind the gateway's
 * auth like everything else; browsers get the Basic-auth prompt, as for Bull Board.
 */
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import { buildOpenApiDocument } from "./openapi-document.js";

export const OPENAPI_PATH = "/openapi.json";
export const DOCS_PATH = "/docs";

export async function registerApiDocs(
  app: FastifyInstance,
  opts: { rpcMethods: string[]; messageBytes: number },
): Promise<void> {
  const document = buildOpenApiDocument(opts);
  app.get(OPENAPI_PATH, async () => document);
  // Static mode: the document above is the whole truth; no route is introspected.
  await app.register(fastifySwagger, { mode: "static", specification: { document: document as never } });
  await app.register(fastifySwaggerUi, {
    routePrefix: DOCS_PATH,
    uiConfig: { docExpansion: "list", deepLinking: true, persistAuthorization: true },
  });
}
