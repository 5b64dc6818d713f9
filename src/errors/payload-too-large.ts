import { SwitchboardError } from "./switchboard-error.js";

/**
 * A message (or a whole request body) over the configured size limit. Every door answers it
 * with HTTP 413 and the limit, so a client can tell "too big" from "malformed".
 */
export class PayloadTooLargeError extends SwitchboardError {
  constructor(opts: { field?: string; sizeBytes?: number; limitBytes: number; bodyLimitBytes?: number }) {
    const what = opts.field
      ? `${opts.field} is ${opts.sizeBytes ?? "over the limit of"} bytes`
      : "request body is too large";
    const limit = opts.field
      ? `the message limit is ${opts.limitBytes} bytes of UTF-8 text`
      : `the body limit is ${opts.bodyLimitBytes} bytes ` +
        `(messages may have up to ${opts.limitBytes} bytes of UTF-8 text)`;
    super("payload_too_large", `${what}; ${limit} (gateway.limits.messageBytes)`, {
      limitBytes: opts.limitBytes,
      ...(opts.field ? { field: opts.field } : {}),
      ...(opts.sizeBytes !== undefined ? { sizeBytes: opts.sizeBytes } : {}),
      ...(opts.bodyLimitBytes !== undefined ? { bodyLimitBytes: opts.bodyLimitBytes } : {}),
    });
  }
}
