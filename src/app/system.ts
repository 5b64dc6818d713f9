/**
 * Assembling a process: gateway, workers, or both (`switchboard start`). Tests use the same
 * entry point, so what they exercise is what operators run.
 */
import type { Config } from "../config/schema.js";
import type { Gateway } from "../gateway/server.js";
import { QUEUE_NAMES, type QueueName } from "../queues/queue-names.js";
import { startWorkerHost, type WorkerHost } from "../workers/worker-host.js";
import { createServices, type Services } from "./services.js";
import { createToolRuntime } from "../tools/tool-runtime.js";
import { startMetricsServer, type MetricsServer } from "../metrics/index.js";

export interface SystemOptions {
  gateway?: boolean;
  workers?: { queues?: QueueName[]; concurrency?: number } | false;
  logger?: boolean;
  /**
   * Aborted (a SIGTERM while starting): start nothing more and close what has started, gracefully
   * (running turns finish within the grace or are handed back), then reject with the signal's reason.
   */
  signal?: AbortSignal;
}

export interface SwitchboardSystem {
  svc: Services;
  gateway?: Gateway;
  workers?: WorkerHost;
  /** The gateway's base URL once listening. */
  url?: string;
  /** A worker process's own metrics endpoint (`workers.metricsPort`), when enabled. */
  metricsUrl?: string;
  close(): Promise<void>;
}

/**
 * `listen EADDRINUSE: address already in use 127.0.0.1:7420` does not say which setting to
 * change (the gateway and the metrics server both listen): name it. Other errors pass unchanged.
 */
function portInUse(err: unknown, setting: string, host: string): unknown {
  if ((err as NodeJS.ErrnoException)?.code !== "EADDRINUSE") return err;
  return Object.assign(
    new Error(`${setting} is already in use on ${host}: stop what listens there or choose another port`, {
      cause: err,
    }),
    { code: "EADDRINUSE" },
  );
}

export async function startSystem(config: Config, opts: SystemOptions = {}): Promise<SwitchboardSystem> {
  const role = opts.gateway && opts.workers ? "all" : opts.gateway ? "gateway" : "worker";
  const svc = createServices(config, { role });
  const tools = createToolRuntime(svc);
  let workers: WorkerHost | undefined;
  let gateway: Gateway | undefined;
  let url: string | undefined;
  let metrics: MetricsServer | undefined;
  // Between steps: workers take turns as soon as they start, so a stop must close them, not kill them.
  const stopIfAborted = () => opts.signal?.throwIfAborted();
  try {
    stopIfAborted();
    if (opts.workers) {
      workers = await startWorkerHost(svc, {
        queues: opts.workers.queues ?? [...QUEUE_NAMES],
        ...(opts.workers.concurrency ? { concurrency: opts.workers.concurrency } : {}),
        tools: tools.invokerFor,
        processors: tools.processors,
      });
      const port = config.workers.metricsPort;
      if (port !== undefined)
        metrics = await startMetricsServer(config.workers.metricsHost, port).catch((err: unknown) => {
          throw portInUse(err, `workers.metricsPort ${port}`, config.workers.metricsHost);
        });
    }
    stopIfAborted();
    if (opts.gateway) {
      // Loaded only when wanted: a worker process never loads fastify, Bull Board or the API docs.
      const { createGateway } = await import("../gateway/server.js");
      gateway = await createGateway(svc, {
        tools: tools.endpoint,
        ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
      });
      stopIfAborted();
      url = await gateway.listen().catch((err: unknown) => {
        throw portInUse(err, `gateway.port ${config.gateway.port} (SWITCHBOARD_PORT)`, config.gateway.host);
      });
    }
    stopIfAborted();
  } catch (err) {
    // The gateway first, as close() does: no new work, then the workers' grace.
    await gateway?.close().catch(() => {});
    await metrics?.close().catch(() => {});
    await workers?.close().catch(() => {});
    await svc.close();
    throw err;
  }
  return {
    svc,
    ...(gateway ? { gateway } : {}),
    ...(workers ? { workers } : {}),
    ...(url ? { url } : {}),
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    // Gateway first (no new work, its waits handed over), then the workers (grace period).
    async close() {
      await gateway?.close().catch(() => {});
      await workers?.close().catch(() => {});
      await metrics?.close().catch(() => {});
      await svc.close();
    },
  };
}
