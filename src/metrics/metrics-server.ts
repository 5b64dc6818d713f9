/**
 * A worker process's metrics endpoint: its own registry on a small HTTP server
 * (`workers.metricsPort`; off unless set). Deployment-wide numbers are the gateway's to serve.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { processRegistry } from "./registry.js";

export interface MetricsServer {
  /** `http://host:port/metrics` as bound (port 0 → the port the OS picked). */
  url: string;
  close(): Promise<void>;
}

export async function startMetricsServer(host: string, port: number): Promise<MetricsServer> {
  const registry = processRegistry();
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: GET /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics failed: ${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const shownHost = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shownHost}:${addr.port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
