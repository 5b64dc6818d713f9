/** The agent-to-agent context texts (docs/concepts/tools.md, "sessions_send"), as OpenClaw words them. */
export interface A2AParties {
  requesterKey: string;
  requesterChannel?: string;
  targetKey: string;
  targetChannel?: string;
}

function partyLines(p: A2AParties): string[] {
  return [
    `Agent 1 (requester) session: ${p.requesterKey}.`,
    ...(p.requesterChannel ? [`Agent 1 (requester) channel: ${p.requesterChannel}.`] : []),
    `Agent 2 (target) session: ${p.targetKey}.`,
    ...(p.targetChannel ? [`Agent 2 (target) channel: ${p.targetChannel}.`] : []),
  ];
}

export function messageContext(p: A2AParties): string {
  return ["Agent-to-agent message context:", ...partyLines(p)].join("\n");
}

export function replyContext(p: A2AParties, turn: number, max: number, current: "requester" | "target"): string {
  return [
    "Agent-to-agent reply step:",
    `Current agent: ${current === "requester" ? "Agent 1 (requester)" : "Agent 2 (target)"}.`,
    `Turn ${turn} of ${max}.`,
    ...partyLines(p),
    'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".',
  ].join("\n");
}

export const ANNOUNCE_MESSAGE = "Agent-to-agent announce step.";

export function announceContext(p: A2AParties, original: string, round1?: string, latest?: string): string {
  return [
    "Agent-to-agent announce step:",
    ...partyLines(p),
    `Original request: ${original}`,
    `Round 1 reply: ${round1 ?? "(not available)."}`,
    `Latest reply: ${latest ?? "(not available)."}`,
    'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".',
    "Any other reply will be posted to the target channel.",
    "After this reply, the agent-to-agent conversation is over.",
  ].join("\n");
}
