/**
 * The chaos suite's verdict, as pure functions over what the clients logged, what the
 * transcripts hold and how every run ended. Each returns a list of problems (empty = held), so a
 * failure names every message that went wrong, not just the first.
 */
import { conversation, type TranscriptLine } from "../fixtures/runs-support.js";
import { expectedReply, seqOf, type SentMessage, type WaitRecord } from "./session-client.js";

export interface FinalRun {
  status: string;
  reply?: string;
  /** When the run's record turned terminal (Redis's clock; the worker's endedAt when absent). */
  endedAt?: number;
}

/**
 * One session's transcript against what its client sent: every acknowledged message has exactly
 * one user line followed by its one reply; user lines are in send order; nothing appears twice.
 * A message never acknowledged may be missing, but if present it too is there once, in order.
 */
export function checkTranscript(session: number, sent: SentMessage[], lines: TranscriptLine[]): string[] {
  const problems: string[] = [];
  const where = `session ${session}`;
  const ids = lines.filter((l) => l.type === "message").map((l) => l.id);
  const doubledIds = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (doubledIds.length) problems.push(`${where}: line ids written twice: ${doubledIds.join(", ")}`);

  const convo = conversation(lines);
  const sentTexts = new Map(sent.map((m) => [m.text, m]));
  const seen = new Set<string>();
  let lastSeq = -1;
  for (let i = 0; i < convo.length; i++) {
    const line = convo[i]!;
    if (line.role !== "user") {
      problems.push(`${where}: line ${i} is an unexpected ${line.role} line ${JSON.stringify(line.text)}`);
      continue;
    }
    if (seen.has(line.text)) problems.push(`${where}: doubled user line ${JSON.stringify(line.text)}`);
    seen.add(line.text);
    if (!sentTexts.has(line.text)) problems.push(`${where}: user line nobody sent ${JSON.stringify(line.text)}`);
    const seq = seqOf(line.text) ?? -1;
    if (seq <= lastSeq) problems.push(`${where}: #${seq} after #${lastSeq}: out of order`);
    lastSeq = Math.max(lastSeq, seq);
    const reply = convo[i + 1];
    if (reply?.role !== "assistant" || reply.text !== expectedReply(line.text)) {
      problems.push(`${where}: #${seq} is followed by ${JSON.stringify(reply ?? null)}, not its reply`);
    } else {
      i++;
    }
  }
  for (const m of sent)
    if (m.acked && !seen.has(m.text)) problems.push(`${where}: acknowledged #${m.seq} lost (not in the transcript)`);
  return problems;
}

/** Every acknowledged run ended ok with its own reply. */
export function checkRuns(sent: SentMessage[], finals: Map<string, FinalRun | string>): string[] {
  const problems: string[] = [];
  for (const m of sent) {
    if (!m.acked || !m.runId) continue;
    const f = finals.get(m.runId);
    if (typeof f === "string" || !f)
      problems.push(`run of s${m.session}#${m.seq} (${m.runId}): ${f ?? "never looked up"}`);
    else if (f.status !== "ok" || f.reply !== expectedReply(m.text))
      problems.push(`run of s${m.session}#${m.seq} (${m.runId}) ended ${JSON.stringify(f)}`);
  }
  return problems;
}

/**
 * A wait that answered "timeout" was honest: its run had not ended when that wait was sent
 * (it ended later, and did end: `checkRuns` holds every acknowledged run to that).
 */
export function checkTimedOutWaits(waits: WaitRecord[], finals: Map<string, FinalRun | string>): string[] {
  const problems: string[] = [];
  for (const w of waits) {
    if (w.outcome !== "timeout") continue;
    const f = finals.get(w.runId);
    if (typeof f !== "object") problems.push(`timed-out wait s${w.session}#${w.seq}: its run never finished (${f})`);
    else if (f.endedAt !== undefined && f.endedAt < w.sentAt) {
      problems.push(
        `wait s${w.session}#${w.seq} said timeout but its run had ended ${w.sentAt - f.endedAt} ms before ` +
          `the wait was sent`,
      );
    }
  }
  return problems;
}
