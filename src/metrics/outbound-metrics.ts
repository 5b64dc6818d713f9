/**
 * Outbound traffic seen by this process: channel deliveries by outcome and sub-agent announce
 * attempts that failed (retried, or given up on the last attempt).
 */
import { Counter } from "prom-client";
import { processRegistry } from "./registry.js";

let instruments: { deliveries: Counter<"status">; announceRetries: Counter; announceFailures: Counter } | undefined;

function outboundInstruments() {
  if (instruments) return instruments;
  const registers = [processRegistry()];
  instruments = {
    deliveries: new Counter({
      name: "switchboard_deliveries_total",
      help:
        "Delivery attempts by outcome (delivered, retry, failed, blocked, no_route; waiting: behind an earlier " +
        "message to the same chat; orphaned: a chat's first message passed, its job gone)",
      labelNames: ["status"],
      registers,
    }),
    announceRetries: new Counter({
      name: "switchboard_announce_retries_total",
      help: "Sub-agent announce attempts that failed and will be retried",
      registers,
    }),
    announceFailures: new Counter({
      name: "switchboard_announce_failures_total",
      help: "Sub-agent announces given up after their last attempt",
      registers,
    }),
  };
  return instruments;
}

export function registerOutboundMetrics(): void {
  outboundInstruments();
}

export function deliveryCounted(status: string): void {
  outboundInstruments().deliveries.inc({ status });
}

/** An announce attempt failed: a retry follows unless it was the last attempt. */
export function announceAttemptFailed(lastAttempt: boolean): void {
  const m = outboundInstruments();
  if (lastAttempt) m.announceFailures.inc();
  else m.announceRetries.inc();
}
