export { processRegistry } from "./registry.js";
export { turnStarted, turnEnded, leaseAcquired, registerTurnMetrics } from "./turn-metrics.js";
export { deliveryCounted, announceAttemptFailed, registerOutboundMetrics } from "./outbound-metrics.js";
export { registerHttpMetrics } from "./http-metrics.js";
export { registerTranscriptMetrics, transcriptSynced, transcriptSyncFailed } from "./transcript-metrics.js";
export { createDeploymentRegistry } from "./deployment-metrics.js";
export { startMetricsServer, type MetricsServer } from "./metrics-server.js";
