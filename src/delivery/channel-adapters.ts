/**
 * Outbound channel adapters, configured under `channels` (docs/concepts/config.md). `webhook` POSTs the
 * message as JSON and treats any non-2xx answer as a failure to retry; `log` only records.
 */
import type { ChannelConfig } from "../config/schema.js";
import type { DeliveryRoute } from "./delivery-log.js";

export interface OutboundMessage extends DeliveryRoute {
  id: string;
  message: string;
  sessionKey: string;
  kind: string;
}

export class DeliveryHttpError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "DeliveryHttpError";
  }
}

/**
 * undici says only "fetch failed"; the reason (ECONNREFUSED, a DNS failure, a TLS error) is in
 * `cause`, and without it the delivery record cannot tell an operator what to fix.
 */
function fetchFailure(err: unknown): string {
  const e = err as Error & { cause?: unknown };
  const cause = e.cause as (Error & { code?: string }) | undefined;
  if (!(cause instanceof Error) || !cause.message || e.message.includes(cause.message)) return e.message;
  return `${e.message}: ${cause.message}`;
}

export async function sendThroughChannel(cfg: ChannelConfig, msg: OutboundMessage): Promise<void> {
  if (cfg.kind === "log") return;
  let res: Response;
  try {
    res = await fetch(cfg.url, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": msg.id, ...(cfg.headers ?? {}) },
      body: JSON.stringify(msg),
      signal: AbortSignal.timeout(cfg.timeoutMs),
    });
  } catch (err) {
    throw new Error(fetchFailure(err), { cause: err });
  }
  if (!res.ok) {
    const body = (await res.text().catch(() => "")).slice(0, 200);
    throw new DeliveryHttpError(`webhook answered ${res.status}${body ? `: ${body}` : ""}`, res.status);
  }
}
