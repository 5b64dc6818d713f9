/**
 * The five queues. Each is visible in Bull Board; workers can be started for any subset
 * (`switchboard worker --queues runs,delivery`).
 *  - runs:        session drains (agent turns from inbound messages, sends)
 *  - subagents:   drains of sub-agent sessions, with a deployment-wide concurrency limit
 *                 (`agents.defaults.subagents.maxConcurrent`, BullMQ global concurrency)
 *  - announce:    agent-to-agent steps after a send, sub-agent completion announces
 *  - delivery:    outbound messages to channels, retried with backoff, every outcome recorded
 *  - maintenance: reset/idle sweeps (Job Scheduler) and transcript archiving
 */
export const QUEUE_NAMES = ["runs", "subagents", "announce", "delivery", "maintenance"] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export function parseQueueList(csv: string | undefined): QueueName[] {
  if (!csv) return [...QUEUE_NAMES];
  const names = csv
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.filter((n) => !(QUEUE_NAMES as readonly string[]).includes(n));
  if (bad.length) throw new Error(`unknown queue(s): ${bad.join(", ")} (known: ${QUEUE_NAMES.join(", ")})`);
  return names as QueueName[];
}

/** BullMQ job ids may not contain ':' nor be all digits; session keys are full of ':'. */
export function jobIdPart(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]/g, "_");
}
