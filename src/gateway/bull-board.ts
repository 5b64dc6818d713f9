/**
 * Bull Board at /admin/queues, showing every Switchboard queue and, as the read-only `ready`
 * queue, the ready list and the dead letters (src/gateway/ready-board.ts). Base path and plugin
 * prefix must match or the UI's assets 404. Job data can hold message text, so it is shown only
 * behind the gateway's auth.
 */
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import type { FastifyInstance } from "fastify";
import type { Queues } from "../queues/queues.js";
import { ReadyBoardAdapter, type ReadyBoardDeps } from "./ready-board.js";

export const BOARD_PATH = "/admin/queues";

const DESCRIPTIONS: Record<string, string> = {
  runs:
    "Session drains run as jobs: retries, lease waits, handed-back turns (ready-list drains: the ready queue). " +
    "Removing a drain job loses no turn: the maintenance sweep re-arms its session. " +
    "Pausing this queue holds the turns of every session but sub-agents' (subagents), ready-list drains included " +
    "(between two turns, within a second).",
  announce: "Agent-to-agent steps: reply-back loop and announce",
  delivery: "Outbound messages to channels (retried with backoff)",
  maintenance: "Reset/idle sweeps and transcript archiving",
};

export async function registerBullBoard(app: FastifyInstance, svc: ReadyBoardDeps & { queues: Queues }): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: [
      ...Object.entries(svc.queues).map(
        ([name, q]) => new BullMQAdapter(q, { description: DESCRIPTIONS[name] ?? name }),
      ),
      new ReadyBoardAdapter(svc),
    ],
    serverAdapter,
    options: { uiConfig: { boardTitle: "Switchboard" } },
  });
  await app.register(serverAdapter.registerPlugin() as never, { prefix: BOARD_PATH });
}
