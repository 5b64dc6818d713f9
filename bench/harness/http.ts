/**
 * HTTP for the over-the-wire figures: one keep-alive JSON client shared by both sides (so the
 * client's own cost is the same for Switchboard and the baseline), a bounded-concurrency
 * runner, and the bare baseline route (fastify + one `queue.add`).
 */
import { Agent, request } from "node:http";
import Fastify, { type FastifyInstance } from "fastify";
import type { Queue } from "bullmq";

export class JsonClient {
  private readonly agent: Agent;
  private readonly url: URL;

  constructor(baseUrl: string, maxSockets: number) {
    this.url = new URL(baseUrl);
    this.agent = new Agent({ keepAlive: true, maxSockets });
  }

  // biome-ignore lint/suspicious/noExplicitAny: replies are loosely typed JSON; each figure reads the fields it needs
  async post(path: string, body: unknown): Promise<{ status: number; body: any }> {
    const payload = JSON.stringify(body);
    return await new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.url.hostname,
          port: this.url.port,
          method: "POST",
          path,
          agent: this.agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => {
            try {
              resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
            } catch {
              resolve({ status: res.statusCode ?? 0, body: text });
            }
          });
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  }

  /** A Switchboard gateway RPC; throws on anything but `{ok: true}`. */
  // biome-ignore lint/suspicious/noExplicitAny: as for post()
  async rpc(method: string, params: unknown): Promise<any> {
    const r = await this.post(`/v1/rpc/${method}`, params);
    if (r.status !== 200 || !r.body?.ok)
      throw new Error(`rpc ${method}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    return r.body.result;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Run `fn(0..n-1)` with at most `concurrency` calls in flight. */
export async function runPool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < n) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, lane));
}

/** The bare baseline route: POST /add does one `queue.add` of the body and answers its id. */
export async function startBareRoute(queue: Queue): Promise<{ url: string; app: FastifyInstance }> {
  const app = Fastify({ logger: false });
  app.post("/add", async (req) => {
    const job = await queue.add("job", req.body as Record<string, unknown>);
    return { ok: true, id: job.id };
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { url, app };
}
