/**
 * `/metrics` of a gateway: this process's registry (its HTTP latency, Node's process metrics,
 * and turn metrics too when workers run in the same process) followed by the deployment-wide
 * series read from Redis at scrape time (docs/concepts/metrics.md).
 */
import type { FastifyInstance } from "fastify";
import type { GatewayDeps } from "./gateway-deps.js";
import { createDeploymentRegistry, processRegistry, registerHttpMetrics } from "../metrics/index.js";

export function registerMetrics(app: FastifyInstance, svc: GatewayDeps): void {
  registerHttpMetrics(app);
  const deployment = createDeploymentRegistry(svc);
  app.get("/metrics", async (_req, reply) => {
    const own = processRegistry();
    const [mine, shared] = await Promise.all([own.metrics(), deployment.metrics()]);
    return reply.type(own.contentType).send(`${mine.trimEnd()}\n${shared}`);
  });
}
