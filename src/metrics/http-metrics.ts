/**
 * HTTP latency of the gateway by route. The label is the route pattern (`/v1/runs/:id`), never
 * the raw URL: run ids and session keys in paths would make one series per request.
 */
import type { FastifyInstance } from "fastify";
import { Histogram } from "prom-client";
import { processRegistry } from "./registry.js";

let histogram: Histogram<"method" | "route" | "status_code"> | undefined;

function httpHistogram() {
  return (histogram ??= new Histogram({
    name: "switchboard_http_request_duration_seconds",
    help: "Gateway HTTP request latency by method, route pattern and status code",
    labelNames: ["method", "route", "status_code"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [processRegistry()],
  }));
}

/** Requests that matched no route share one label, whatever their path. */
export const UNMATCHED_ROUTE = "(unmatched)";

export function registerHttpMetrics(app: FastifyInstance): void {
  const h = httpHistogram();
  app.addHook("onResponse", async (req, reply) => {
    h.observe(
      { method: req.method, route: req.routeOptions.url ?? UNMATCHED_ROUTE, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
}
