/**
 * The baseline: bare BullMQ on the same Redis. A queue, optionally a Worker with a no-op
 * processor (same concurrency as the Switchboard side), and the completions it saw.
 */
import { randomUUID } from "node:crypto";
import { Queue, QueueEvents, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { benchClient } from "./redis.js";
import { type JsonClient, runPool } from "./http.js";
import { perSecond } from "./stats.js";

export class BareBullmq {
  readonly name = `bare-${randomUUID().slice(0, 8)}`;
  readonly queue: Queue;
  private worker: Worker | undefined;
  private events: QueueEvents | undefined;
  private readonly connections: Redis[] = [];
  private completed: number[] = [];
  private waiters: { n: number; resolve: () => void }[] = [];

  constructor(private readonly url: string) {
    this.queue = new Queue(this.name, { connection: this.conn() });
  }

  private conn(): Redis {
    const c = benchClient(this.url);
    this.connections.push(c);
    return c;
  }

  /** A worker in this process: a no-op processor, completions counted as they happen. */
  async startWorker(concurrency: number): Promise<void> {
    this.worker = new Worker(this.name, async () => "ok", { connection: this.conn(), concurrency });
    this.worker.on("completed", () => {
      this.completed.push(Date.now());
      this.waiters = this.waiters.filter((w) => {
        if (this.completed.length < w.n) return true;
        w.resolve();
        return false;
      });
    });
    await this.worker.waitUntilReady();
  }

  /** QueueEvents, for `job.waitUntilFinished` (what a bare send-and-wait uses). */
  async queueEvents(): Promise<QueueEvents> {
    if (!this.events) {
      this.events = new QueueEvents(this.name, { connection: this.conn() });
      await this.events.waitUntilReady();
    }
    return this.events;
  }

  resetCompleted(): void {
    this.completed = [];
  }

  async waitForCompleted(n: number, timeoutMs: number): Promise<void> {
    if (this.completed.length >= n) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.waiters.push({ n, resolve })),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`only ${this.completed.length} of ${n} bare jobs completed within ${timeoutMs} ms`)),
            timeoutMs,
          )),
      ),
    ]).finally(() => clearTimeout(timer));
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.events?.close();
    await this.queue.close();
    for (const c of this.connections) c.disconnect();
  }
}

/**
 * One round of the over-HTTP baseline: `count` posts of `body(i)` to the bare route (`inFlight`
 * at a time, through `client`), until `bare`'s worker completed as many jobs; jobs per second.
 */
export async function bareRouteRound(
  bare: BareBullmq,
  client: JsonClient,
  count: number,
  inFlight: number,
  body: (i: number) => Record<string, unknown>,
): Promise<number> {
  bare.resetCompleted();
  const t0 = Date.now();
  await runPool(count, inFlight, async (i) => {
    const r = await client.post("/add", body(i));
    if (r.status !== 200) throw new Error(`bare route: HTTP ${r.status}`);
  });
  await bare.waitForCompleted(count, 120_000);
  return perSecond(count, Date.now() - t0);
}
