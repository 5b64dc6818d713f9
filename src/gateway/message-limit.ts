/**
 * The message size limit at the HTTP doors (docs/concepts/limits.md): before any handler runs,
 * the message text a door carries is measured in UTF-8 bytes against
 * `gateway.limits.messageBytes`; a larger one is refused with 413 and the limit. Bodies beyond
 * the body limit never get this far (fastify refuses them while reading; see http-errors.ts).
 * The OpenAI door measures its turn's text itself, with the same function.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Config } from "../config/schema.js";
import { PayloadTooLargeError } from "../errors/index.js";
import {
  assertMessageSize,
  defaultBodyBytes,
  messageTextsAt,
  toolMessageTexts,
  type MessageText,
} from "../text/message-size.js";

export { assertMessageSize };

const obj = (v: unknown): Record<string, unknown> =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** The inbound door's message field. */
const INBOUND_MESSAGE_FIELDS = ["text"];

/** RPC methods that carry a message, and the field it is in. */
const RPC_MESSAGE_FIELDS: Map<string, string[]> = new Map([
  ["agent", ["message"]],
  ["send", ["message"]],
]);

/** The message texts a request to `routeUrl` carries (pure; unknown routes carry none). */
export function messageTextsOf(routeUrl: string | undefined, params: unknown, body: unknown): MessageText[] {
  const b = obj(body);
  switch (routeUrl) {
    case "/v1/inbound":
      return messageTextsAt(b, "", INBOUND_MESSAGE_FIELDS);
    case "/v1/rpc/:method":
      // A Map, not an object: a method named `hasOwnProperty` must not find Object.prototype's.
      return messageTextsAt(b, "", RPC_MESSAGE_FIELDS.get(String(obj(params).method)) ?? []);
    case "/v1/tools/:name":
      return toolMessageTexts(b.args, "args.");
    default:
      return [];
  }
}

/** The request body limit of the inbound, RPC and tool doors. */
export function requestBodyLimit(config: Config): number {
  return config.gateway.limits.bodyBytes ?? defaultBodyBytes(config.gateway.limits.messageBytes);
}

declare module "fastify" {
  interface FastifyInstance {
    /** The configured message limit, for answering bodies refused while they were read. */
    messageLimitBytes?: number;
  }
}

/** A body fastify refused while reading it (over the route's body limit), as our 413. */
export function bodyTooLargeError(req: FastifyRequest): PayloadTooLargeError {
  const bodyLimitBytes = req.routeOptions.bodyLimit ?? 0;
  return new PayloadTooLargeError({ limitBytes: req.server.messageLimitBytes ?? bodyLimitBytes, bodyLimitBytes });
}

/** Adds the check to every route of `app` (registered before the routes). */
export function registerMessageLimit(app: FastifyInstance, config: Config): void {
  const limit = config.gateway.limits.messageBytes;
  app.decorate("messageLimitBytes", limit);
  app.addHook("preHandler", async (req: FastifyRequest) => {
    assertMessageSize(limit, messageTextsOf(req.routeOptions.url, req.params, req.body));
  });
}
