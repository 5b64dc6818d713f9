/**
 * The two sides of an over-HTTP figure, started and closed together: a Switchboard gateway (with
 * workers in the same process, or without for the accept path alone) and its keep-alive client;
 * a bare fastify route doing one `queue.add` (with a bare no-op Worker of the same concurrency,
 * or none) and a client of its own, as many requests in flight. Figures 2, 4 and 8 differ only in
 * what they send and what they wait for.
 */
import type { BenchContext } from "./context.js";
import { BareBullmq } from "./bare.js";
import { JsonClient, runPool, startBareRoute } from "./http.js";
import {
  benchDeployment,
  type Config,
  type ConfigInput,
  RunDoneWatcher,
  startSwitchboard,
  type SwitchboardSystem,
} from "./switchboard.js";

export interface HttpPairOptions {
  /** Worker slots on both sides; 0: no workers (the gateway and the route only). */
  concurrency: number;
  /** Requests in flight per client. */
  inFlight: number;
  /** Config on top of the bench deployment's. */
  config?: ConfigInput;
}

export interface HttpPair {
  sys: SwitchboardSystem;
  config: Config;
  /** The Switchboard gateway's client. */
  sb: JsonClient;
  /** Run-done notifications of the deployment (with workers only). */
  watcher: RunDoneWatcher | undefined;
  bare: BareBullmq;
  /** The bare route's client. */
  bc: JsonClient;
  close(): Promise<void>;
}

export async function startHttpPair(ctx: BenchContext, opts: HttpPairOptions): Promise<HttpPair> {
  const workers = opts.concurrency > 0;
  const dep = benchDeployment(ctx.redisUrl, opts.config ?? {}, workers ? { concurrency: opts.concurrency } : {});
  const sys = await startSwitchboard(dep.config, { gateway: true, workers });
  const watcher = workers ? await RunDoneWatcher.start(dep.config) : undefined;
  const sb = new JsonClient(sys.url!, opts.inFlight);
  const bare = new BareBullmq(ctx.redisUrl);
  if (workers) await bare.startWorker(opts.concurrency);
  const route = await startBareRoute(bare.queue);
  const bc = new JsonClient(route.url, opts.inFlight);
  return {
    sys,
    config: dep.config,
    sb,
    watcher,
    bare,
    bc,
    async close() {
      sb.close();
      bc.close();
      watcher?.close();
      await route.app.close();
      await bare.close();
      await sys.close();
      dep.cleanup();
    },
  };
}

/** `count` fire-and-forget `agent` RPCs over `sessions` sessions, `inFlight` at a time. */
export async function agentRpcs(sb: JsonClient, count: number, inFlight: number, sessions: number): Promise<void> {
  await runPool(count, inFlight, async (i) => {
    await sb.rpc("agent", { sessionKey: `bench-${i % sessions}`, message: `m${i}` });
  });
}
