/**
 * What the HTTP gateway needs from a process. The gateway sits above what it serves (RPC
 * methods, inbound handling, the tools endpoint, deployment metrics), so its dependencies are
 * theirs together, plus the run waiter it hands over when it shuts down. src/app builds it.
 */
import type { InboundDeps } from "../inbound/handle-inbound.js";
import type { DeploymentMetricsDeps } from "../metrics/deployment-metrics.js";
import type { RpcDeps } from "../rpc/methods.js";
import type { RunWaiter } from "../runs/run-waiter.js";

export interface GatewayDeps extends RpcDeps, InboundDeps, DeploymentMetricsDeps {
  /** The run waiter if this process made one (a shutting-down gateway hands its waits over). */
  existingWaiter(): RunWaiter | undefined;
}
