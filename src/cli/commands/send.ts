import { ValidationError } from "../../errors/index.js";
import { connect, type GlobalOptions } from "../client.js";
import { printJson, terminalSafe } from "../output.js";
import { updateProgress } from "../progress.js";

/** The longest `agent.wait` accepts (600,000 ms). */
const MAX_WAIT_SECONDS = 600;

/** `switchboard send <sessionKey> <message> [--wait SEC]`: enqueue a turn, optionally wait for the reply. */
export async function sendCommand(
  sessionKey: string,
  message: string,
  opts: GlobalOptions & { wait?: string; json?: boolean; agent?: string },
): Promise<number> {
  // Checked before anything is sent: an error after the message is queued would invite a resend.
  const waitSec = opts.wait === undefined ? 0 : Number(opts.wait);
  if (!Number.isFinite(waitSec) || waitSec < 0 || waitSec > MAX_WAIT_SECONDS)
    throw new ValidationError(`--wait must be a number of seconds from 0 to ${MAX_WAIT_SECONDS} (got ${opts.wait})`);
  const client = await connect(opts);
  try {
    const accepted = (await client.rpc("agent", {
      sessionKey,
      message,
      ...(opts.agent ? { agentId: opts.agent } : {}),
    })) as { runId: string; sessionKey: string };
    if (!waitSec) {
      if (opts.json) printJson({ ...accepted, status: "accepted" });
      else process.stdout.write(`queued run ${accepted.runId} in ${accepted.sessionKey}\n`);
      return 0;
    }
    updateProgress(`waiting up to ${waitSec} s for the reply to run ${accepted.runId}…`);
    const res = (await client.rpc("agent.wait", { runId: accepted.runId, timeoutMs: Math.round(waitSec * 1000) })) as {
      status: string;
      reply?: string;
      error?: string;
    };
    if (opts.json) printJson({ ...accepted, ...res });
    else if (res.status === "ok") process.stdout.write(`${terminalSafe(res.reply ?? "")}\n`);
    else process.stderr.write(`run ${accepted.runId}: ${res.status}${res.error ? `: ${res.error}` : ""}\n`);
    return res.status === "ok" ? 0 : 2;
  } finally {
    await client.close();
  }
}
