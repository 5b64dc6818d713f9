/**
 * The bare BullMQ worker process of the RSS baseline: a Worker with a no-op processor.
 *   node dist/bench/bare-worker.js <redisUrl> <queue> <concurrency>
 * Prints "ready" on stderr once connected; SIGTERM closes it.
 */
import { Worker } from "bullmq";
import { Redis } from "ioredis";

const [url, queue, concurrency] = process.argv.slice(2);
if (!url || !queue) {
  process.stderr.write("usage: bare-worker <redisUrl> <queue> [concurrency]\n");
  process.exit(2);
}
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(queue, async () => "ok", { connection, concurrency: Number(concurrency ?? 16) });
await worker.waitUntilReady();
process.stderr.write("bare worker ready\n");
process.on("SIGTERM", () => {
  void worker.close().finally(() => {
    connection.disconnect();
    process.exit(0);
  });
});
