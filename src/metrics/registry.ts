/**
 * The process's own metrics registry: what this process observed (turns it ran, requests it
 * answered) plus Node's default process metrics. Each process serves it: the gateway on
 * `/metrics`, a worker process on its metrics port (docs/concepts/metrics.md). Made once per
 * process on first use, so every instrument registers exactly once.
 */
import { collectDefaultMetrics, Registry } from "prom-client";

let registry: Registry | undefined;

export function processRegistry(): Registry {
  if (!registry) {
    registry = new Registry();
    collectDefaultMetrics({ register: registry });
  }
  return registry;
}
