/**
 * One chaos client per session: it sends its numbered messages in order (each carries its
 * sequence number, and the next is sent only once the previous one was acknowledged), retries a
 * send that got no answer with the same idempotency key (`agent`) or messageId (`/v1/inbound`),
 * and now and then waits for a run with `agent.wait` on the other gateway than the one it sent
 * to. Everything it saw is logged for the assertions; nothing is judged here except answers
 * that are wrong on their face.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { GatewayClient } from "./gateway-client.js";
import type { Random } from "./random.js";

/** Script-runtime delay buckets: the `~dN~` tag in a message picks its turn's duration. */
export const DELAY_BUCKETS_MS = [0, 10, 30, 80, 200] as const;

/**
 * Longer than a gateway holds a retried inbound message whose first delivery is still pending
 * (10 s) before it answers 503, so the client hears that answer instead of timing out first.
 */
const SEND_ATTEMPT_TIMEOUT_MS = 15_000;

export type SendPath = "inbound" | "agent";

export interface SentMessage {
  session: number;
  seq: number;
  text: string;
  /** The gateway answered the send with success. */
  acked: boolean;
  runId?: string;
  sessionKey?: string;
  sessionId?: string;
  /** HTTP attempts until the answer (> 1: retried with the same key). */
  attempts: number;
  /** The gateway recognised a retry of an already-handled message. */
  duplicate: boolean;
}

export interface WaitRecord {
  session: number;
  seq: number;
  runId: string;
  timeoutMs: number;
  /** "answered": terminal status; "timeout": not finished within timeoutMs. */
  outcome: "answered" | "timeout";
  /** Attempts that failed without an answer (gateway killed mid-wait, Redis away). */
  failures: string[];
  /** When the attempt that got the answer was sent, and when the answer came. */
  sentAt: number;
  answeredAt: number;
}

export interface ChaosLog {
  messages: SentMessage[];
  waits: WaitRecord[];
  /** Answers that are wrong in themselves (4xx, ok:false, a wrong reply, no answer at all). */
  problems: string[];
}

export interface SessionPlan {
  index: number;
  path: SendPath;
  messages: number;
  /** Sends are spread over this window, starting at `startAt`. */
  startAt: number;
  windowMs: number;
  waitChance: number;
  /** How long a send is retried before it is given up as unacknowledged. */
  sendDeadlineMs: number;
}

export function messageText(session: number, seq: number, bucket: number): string {
  return `chaos s${session} #${seq} ~d${bucket}~`;
}

/** The sequence number a message text carries (the inverse of `messageText`). */
export function seqOf(text: string): number | undefined {
  const m = /#(\d+) /.exec(text);
  return m ? Number(m[1]) : undefined;
}

export function expectedReply(text: string): string {
  return `re: ${text}`;
}

export async function runSessionClient(
  plan: SessionPlan,
  client: GatewayClient,
  rnd: Random,
  log: ChaosLog,
): Promise<void> {
  const sendVia = plan.index % 2;
  for (let seq = 0; seq < plan.messages; seq++) {
    const at = plan.startAt + ((seq + rnd.next()) * plan.windowMs) / plan.messages;
    if (at > Date.now()) await sleep(at - Date.now());
    const text = messageText(plan.index, seq, rnd.int(0, DELAY_BUCKETS_MS.length - 1));
    const sent = await send(plan, seq, text, sendVia, client, log);
    log.messages.push(sent);
    if (sent.acked && sent.runId && rnd.chance(plan.waitChance)) {
      await waitOnce(plan.index, seq, sent.runId, text, rnd.int(300, 4000), (sendVia + 1) % 2, client, log);
    }
  }
}

async function send(
  plan: SessionPlan,
  seq: number,
  text: string,
  gateway: number,
  client: GatewayClient,
  log: ChaosLog,
): Promise<SentMessage> {
  const key = `m-${plan.index}-${seq}`;
  const [path, body] =
    plan.path === "inbound"
      ? ["/v1/inbound", { channel: "telegram", chatType: "dm", from: `chaos-${plan.index}`, text, messageId: key }]
      : ["/v1/rpc/agent", { sessionKey: `chaos-${plan.index}`, message: text, idempotencyKey: key }];
  const out = await client.call(path, body, {
    preferred: gateway,
    attemptTimeoutMs: SEND_ATTEMPT_TIMEOUT_MS,
    deadlineMs: plan.sendDeadlineMs,
  });
  const base: SentMessage = { session: plan.index, seq, text, acked: false, attempts: out.attempts, duplicate: false };
  if (out.status === undefined) return base; // never answered: unacknowledged, may be missing
  const ok =
    plan.path === "inbound" ? out.status === 202 && out.body?.ok === true : out.status === 200 && out.body?.ok === true;
  if (!ok) {
    log.problems.push(`send s${plan.index}#${seq} via ${path}: ${out.status} ${JSON.stringify(out.body)}`);
    return base;
  }
  const r = plan.path === "inbound" ? out.body : out.body.result;
  return {
    ...base,
    acked: true,
    ...(r.runId ? { runId: r.runId as string } : {}),
    ...(r.sessionKey ? { sessionKey: r.sessionKey as string } : {}),
    ...(r.sessionId ? { sessionId: r.sessionId as string } : {}),
    duplicate: r.duplicate === true,
  };
}

async function waitOnce(
  session: number,
  seq: number,
  runId: string,
  text: string,
  timeoutMs: number,
  gateway: number,
  client: GatewayClient,
  log: ChaosLog,
): Promise<void> {
  const out = await client.call(
    "/v1/rpc/agent.wait",
    { runId, timeoutMs },
    { preferred: gateway, attemptTimeoutMs: timeoutMs + 5000, deadlineMs: 60_000 },
  );
  const where = `wait s${session}#${seq} (${runId})`;
  if (out.status === undefined) {
    log.problems.push(`${where}: never answered (${out.failures.join(", ")})`);
    return;
  }
  const result = out.body?.result;
  if (out.status !== 200 || out.body?.ok !== true) {
    log.problems.push(`${where}: ${out.status} ${JSON.stringify(out.body)}`);
    return;
  }
  if (result.status !== "timeout" && !(result.status === "ok" && result.reply === expectedReply(text))) {
    log.problems.push(`${where}: wrong answer ${JSON.stringify(result)}`);
    return;
  }
  log.waits.push({
    session,
    seq,
    runId,
    timeoutMs,
    outcome: result.status === "timeout" ? "timeout" : "answered",
    failures: out.failures,
    sentAt: out.answeredAttemptAt!,
    answeredAt: Date.now(),
  });
}
