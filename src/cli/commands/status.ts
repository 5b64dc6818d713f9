import type { Config } from "../../config/schema.js";
import { readRuntimeInfo } from "../../app/runtime-file.js";
import { deploymentStatus, type DeploymentStatus } from "../../rpc/status.js";
import {
  type Client,
  connect,
  directClientFor,
  loadCliConfig,
  reachable,
  RpcCallError,
  type GlobalOptions,
} from "../client.js";
import { ago, formatTable, printJson } from "../output.js";

/** What `status --json` prints: the gateway as this CLI sees it, then the deployment's status. */
type StatusReport = {
  gateway: { url: string | null; reachable: boolean; tokenRefused?: true; error?: string };
} & Partial<DeploymentStatus>;

/** The status of the deployment in the local config, read from Redis directly. */
async function directStatus(client: Client): Promise<Partial<DeploymentStatus>> {
  return await deploymentStatus(client.svc!, (err) => client.redisDownCause?.(err));
}

/**
 * Over HTTP: the status of the deployment the gateway serves (its `status` RPC method). A token it
 * refuses, or another error, is part of the report; a gateway that does not answer at all leaves
 * the local config's deployment to report, read directly.
 */
async function gatewayStatus(client: Client, config: Config): Promise<StatusReport> {
  const gateway: StatusReport["gateway"] = { url: client.describe, reachable: await reachable(client.describe) };
  if (!gateway.reachable) {
    const direct = await directClientFor(config);
    try {
      return { gateway, ...(await directStatus(direct)) };
    } finally {
      await direct.close();
    }
  }
  try {
    return { gateway, ...((await client.rpc("status")) as DeploymentStatus) };
  } catch (err) {
    if (!(err instanceof RpcCallError)) throw err;
    if (err.code === "unauthorized") gateway.tokenRefused = true;
    else gateway.error = `${err.code}: ${err.message}`;
    return { gateway };
  }
}

/** `switchboard status`: gateway reachability, Redis, queue depths, worker count, recent sessions. */
export async function statusCommand(opts: GlobalOptions & { json?: boolean }): Promise<number> {
  const { config } = loadCliConfig(opts);
  const client = await connect(opts);
  let out: StatusReport;
  try {
    out =
      client.mode === "http"
        ? await gatewayStatus(client, config)
        : {
            gateway: { url: readRuntimeInfo(config.storage.dir)?.gatewayUrl ?? null, reachable: false },
            ...(await directStatus(client)),
          };
  } finally {
    await client.close();
  }
  if (out.sessions) out.sessions = out.sessions.map((x) => ({ ...x, ago: ago(x.updatedAt) }));
  if (opts.json) printJson(out);
  else process.stdout.write(formatStatus(out));
  return out.redis?.up ? 0 : 1;
}

/** The Gateway and Redis lines, and what to do when either is not fine. */
function headLines(out: StatusReport): string[] {
  const g = out.gateway;
  const at = g.url ? ` at ${g.url}` : "";
  const lines = [`Gateway: ${g.reachable ? `up${at}` : `not reachable${at}`}`];
  if (g.tokenRefused) lines.push("         token refused → set --token / SWITCHBOARD_TOKEN / gateway.auth.token");
  if (g.error) lines.push(`         its status failed: ${g.error}`);
  const r = out.redis;
  if (!r) return lines;
  lines.push(`Redis:   ${r.up ? `up (${r.url}, ${r.pingMs} ms)` : `DOWN (${r.url}: ${r.error})`}`);
  if (!r.up)
    lines.push(
      "         start Redis, or point REDIS_URL / redis.url (--config) at it; " +
        "`switchboard doctor` checks the whole setup",
    );
  return lines;
}

function countLines(out: Required<DeploymentStatus>): string[] {
  const st = out.storage;
  const dl = out.deadLetters;
  const ready = out.ready;
  const paused = Object.entries(out.queues)
    .filter(([, c]) => c.paused)
    .map(([name]) => name);
  const held = paused.some((q) => q === "runs" || q === "subagents") ? "turns held" : "jobs held";
  return [
    `Workers: ${out.workers}`,
    ...(paused.length ? [`Paused:  ${paused.join(", ")} (${held} until resumed in Bull Board, /admin/queues)`] : []),
    `Ready:   ${ready.sessions} session${ready.sessions === 1 ? "" : "s"} waiting for a worker slot, ` +
      `${ready.pendingWakes} wake${ready.pendingWakes === 1 ? "" : "s"} pending`,
    st.healthy
      ? "Storage: ok"
      : `Storage: UNHEALTHY since ${new Date(st.since ?? 0).toISOString()} (${st.code}: ${st.message}); ` +
        "turns are parked",
    `Dead letters: ${dl}${dl ? "  (switchboard deadletters to list and replay)" : ""}`,
    "",
  ];
}

function tableLines(out: Required<DeploymentStatus>): string[] {
  const lines = [
    formatTable(
      Object.entries(out.queues).map(([name, c]) => ({ queue: name, ...c })),
      ["queue", "waiting", "active", "delayed", "failed", "workers"],
    ),
  ];
  if (out.processes.length)
    lines.push(
      formatTable(
        out.processes.map((p) => ({
          process: p.role + (p.forced ? " (forced)" : ""),
          host: p.host,
          pid: p.pid,
          heartbeat: ago(p.heartbeatAt),
        })),
        ["process", "host", "pid", "heartbeat"],
      ),
    );
  lines.push(
    out.sessions.length
      ? formatTable(
          out.sessions.map((x) => ({ "recent session": x.key, updated: ago(x.updatedAt) })),
          ["recent session", "updated"],
        )
      : "(no sessions yet)\n",
  );
  return lines;
}

/** The report for people: aligned lines and tables. */
function formatStatus(out: StatusReport): string {
  const lines = headLines(out);
  // Queue counts are there only when Redis answered every question.
  const full = out as Required<DeploymentStatus>;
  if (out.queues && out.processes && out.sessions) lines.push(...countLines(full), ...tableLines(full));
  return lines.join("\n").replace(/\n*$/, "\n");
}
