/**
 * A chat's messages stay in order through a worker process killed with SIGKILL in the middle of
 * a POST (docs/concepts/reliability.md, "Replies reach a chat in order"): the message being sent
 * is sent again by the next worker once the dead one's job lock expired (at least once: the
 * webhook may see it twice), and none of the messages behind it, which the dead worker had put
 * back to wait, goes before it. Real processes, a real webhook (node:http), real Redis.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FAST_WORKERS, type ChildHandle, type TestSystem } from "../helpers/system.js";
import { cleanUp, deliveries, deploy, onCleanUp } from "../helpers/api.js";
import { spawnWorker } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";

const COUNT = 12;
/** The message whose first POST the webhook holds unanswered: its worker is killed meanwhile. */
const CUT = "c3";

let server: Server;
let url: string;
/** Every POST's message, in the order the webhook received them. */
const received: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const message = (JSON.parse(raw) as { message: string }).message;
      received.push(message);
      // Held: the worker sending it dies before any answer (the test closes it at the end).
      if (message === CUT && received.filter((m) => m === CUT).length === 1) return;
      setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end("{}"), 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
afterEach(cleanUp);

async function worker(sys: TestSystem): Promise<ChildHandle> {
  const w = await spawnWorker(sys.config);
  onCleanUp(() => w.kill9());
  return w;
}

describe("delivery lanes: worker crash", () => {
  it("a worker killed -9 mid-POST: the next worker sends that message again, and the order holds", async () => {
    const sys = await deploy(
      {
        maintenance: { sweepEveryMs: 3_600_000 },
        workers: { ...FAST_WORKERS, deliveryAttempts: 5, deliveryBackoffMs: 100 },
        channels: { hook: { kind: "webhook", url } },
      },
      { gateway: true, workers: false },
    );
    const a = await worker(sys);
    const messages = Array.from({ length: COUNT }, (_, i) => `c${i}`);
    for (const message of messages)
      await sys.rpc("send", { sessionKey: "agent:main:hook:dm:crash", channel: "hook", to: "crash", message });

    // c3's POST has reached the webhook, which holds it: its worker dies mid-POST.
    await settle(() => received.includes(CUT), { what: `${CUT} POSTed`, timeoutMs: 20_000 });
    await a.kill9();
    expect(received, "nothing after c3 was sent while c3 was in flight").toEqual(["c0", "c1", "c2", CUT]);

    await worker(sys);
    const recs = await settle(
      async () => {
        const found = await deliveries(sys, { sessionKey: "agent:main:hook:dm:crash", limit: 100 });
        return found.length === COUNT && found.every((d) => d.status === "delivered") ? found : undefined;
      },
      { what: `all ${COUNT} delivered after the crash`, timeoutMs: 60_000 },
    );
    expect(recs).toHaveLength(COUNT);

    // Every message reached the webhook, and never one before an earlier one: the POSTs, repeats
    // included, go through the messages in order. The one cut off was POSTed again.
    const index = received.map((m) => messages.indexOf(m));
    expect(index.every((i) => i >= 0)).toBe(true);
    for (let k = 1; k < index.length; k++)
      expect(index[k], `POST ${k}: ${received.join(",")}`).toBeGreaterThanOrEqual(index[k - 1]!);
    expect([...new Set(received)]).toEqual(messages);
    expect(received.filter((m) => m === CUT).length, received.join(",")).toBe(2);
  }, 90_000);
});
