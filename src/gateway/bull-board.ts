/**
 * Bull Board at /admin/queues, showing every Switchboard queue. Base path and plugin prefix
 * must match or the UI's assets 404. Job data can hold message text, so it is shown only
 * behind the gateway's auth.
 */
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import type { FastifyInstance } from "fastify";
import type { Queues } from "../queues/queues.js";

export const BOARD_PATH = "/admin/queues";

const DESCRIPTIONS: Record<string, string> = {
  runs: "Session drains run as jobs: retries, lease waits, long sessions (ready-list drains: see /metrics)",
  announce: "Agent-to-agent steps: reply-back loop and announce",
  delivery: "Outbound messages to channels (retried with backoff)",
  maintenance: "Reset/idle sweeps and transcript archiving",
};

export async function registerBullBoard(app: FastifyInstance, queues: Queues): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: Object.entries(queues).map(
      ([name, q]) => new BullMQAdapter(q, { description: DESCRIPTIONS[name] ?? name }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: "Switchboard" } },
  });
  await app.register(serverAdapter.registerPlugin() as never, { prefix: BOARD_PATH });
}
