import { setTimeout as sleep } from "node:timers/promises";
import { SwitchboardError } from "../../errors/index.js";
import { type Client, connect, type GlobalOptions } from "../client.js";
import { UsageError } from "../flags.js";
import { EXIT, jsonError, printJson, terminalSafe } from "../output.js";
import { startProgress, updateProgress } from "../progress.js";

/** The longest `agent.wait` accepts (600,000 ms). */
const MAX_WAIT_SECONDS = 600;
/** Between attempts to reach a gateway (or Redis) again during a wait. */
const RETRY_EVERY_MS = 500;
/** An early `timeout` with less than this left is the answer, not a reason to ask again. */
const MIN_ASK_MS = 200;

/**
 * Errors of a wait that another attempt may not meet: the gateway gone (killed, restarting), a
 * gateway or Redis not answering for now. Any other error (a refused token, a run not found) is
 * the answer.
 */
const TRANSIENT = new Set(["gateway_unreachable", "http_error", "unavailable", "redis_unavailable"]);

interface WaitAnswer {
  status: string;
  reply?: string;
  error?: string;
}

/** How to wait for a run again, for the one who ran `send`. */
function waitHint(runId: string): string {
  return `switchboard call agent.wait --params '${JSON.stringify({ runId, timeoutMs: 600_000 })}'`;
}

/**
 * `switchboard send <sessionKey> <message> [--wait SEC]`: enqueue a turn, optionally wait for the reply.
 *
 * Once the message is accepted it is queued and runs, whatever happens to this process or the
 * gateway: its runId is printed at once (stderr, or in the final JSON), and a wait that fails
 * (exit 3) or is interrupted (exit 130) says so with the runId and how to wait for it, so that
 * nobody sends the message again to find out.
 */
export async function sendCommand(
  sessionKey: string,
  message: string,
  opts: GlobalOptions & { wait?: string; json?: boolean; agent?: string },
): Promise<number> {
  // Checked before anything is sent: an error after the message is queued would invite a resend.
  const waitSec = opts.wait === undefined ? 0 : Number(opts.wait);
  if (opts.wait?.trim() === "" || !Number.isFinite(waitSec) || waitSec < 0 || waitSec > MAX_WAIT_SECONDS)
    throw new UsageError(`--wait must be a number of seconds from 0 to ${MAX_WAIT_SECONDS} (got ${opts.wait})`);
  let client = await connect(opts);
  let accepted: { runId: string; sessionKey: string } | undefined;
  let pending: { signal: NodeJS.Signals; code: number } | undefined;
  // From the moment the message is sent: once accepted, a signal prints its runId; before the
  // answer, the answer is awaited to know whether it was queued (a second signal exits at once).
  const interrupted = (signal: NodeJS.Signals, code: number): void => {
    if (!accepted) {
      if (pending) process.exit(code);
      pending = { signal, code };
      return;
    }
    const why =
      `interrupted (${signal})${waitSec ? " while waiting" : ""}: ` +
      `run ${accepted.runId} is queued and goes on; do not send it again`;
    if (opts.json) printJson(jsonError("interrupted", why, { ...accepted, status: "interrupted" }));
    process.stderr.write(`${why}. Wait for it with: ${waitHint(accepted.runId)}\n`);
    process.exit(code);
  };
  const stopWatching = onInterrupt(interrupted);
  try {
    const answer = (await client.rpc("agent", {
      sessionKey,
      message,
      ...(opts.agent ? { agentId: opts.agent } : {}),
    })) as { runId: string; sessionKey: string };
    accepted = answer;
    if (pending) interrupted(pending.signal, pending.code);
    if (!waitSec) {
      if (opts.json) printJson({ ...answer, status: "accepted" });
      else process.stdout.write(`queued run ${answer.runId} in ${answer.sessionKey}\n`);
      return EXIT.ok;
    }
    // On stderr in --json mode too (stdout stays one JSON object): whatever happens to this process
    // from here on, whoever runs it has the runId and need not send the message again.
    process.stderr.write(`queued run ${answer.runId}\n`);
    // That line ended the spinner (any output does): the wait gets its own.
    if (!opts.json) startProgress(`waiting up to ${Math.round(waitSec)} s for the reply to run ${answer.runId}…`);
    const outcome = await waitForRun(answer.runId, Date.now() + Math.round(waitSec * 1000), opts, client, (c) => {
      client = c;
    });
    if ("failed" in outcome) {
      const err = outcome.failed;
      const code = err instanceof SwitchboardError ? err.code : "internal";
      const why = `the wait for run ${answer.runId} failed: ${(err as Error)?.message ?? String(err)}`;
      if (opts.json) printJson(jsonError(code, why, { ...answer, status: "unknown" }));
      process.stderr.write(
        `error [${code}]: ${why}\nrun ${answer.runId} was queued and goes on; its outcome is unknown here, ` +
          `do not send it again. Wait for it with: ${waitHint(answer.runId)}\n`,
      );
      return EXIT.unknown;
    }
    const res = outcome.answer;
    if (opts.json) printJson({ ...answer, ...res });
    else if (res.status === "ok") process.stdout.write(`${terminalSafe(res.reply ?? "")}\n`);
    else process.stderr.write(`run ${answer.runId}: ${res.status}${res.error ? `: ${res.error}` : ""}\n`);
    return res.status === "ok" ? EXIT.ok : EXIT.notOk;
  } finally {
    stopWatching();
    await client.close().catch(() => undefined);
  }
}

/**
 * `agent.wait` until `deadline`, asking again when the answer came early without the run's end (a
 * gateway shutting down hands its waits over) or the gateway or Redis could not be reached: on
 * the same --url, else on whichever gateway the CLI finds now (the one `start` recorded, the
 * config's), else Redis directly. `failed` when the last attempt before the deadline was an error.
 */
async function waitForRun(
  runId: string,
  deadline: number,
  opts: GlobalOptions,
  first: Client,
  setClient: (c: Client) => void,
): Promise<{ answer: WaitAnswer } | { failed: unknown }> {
  let client: Client | undefined = first;
  let last: { answer: WaitAnswer } | { failed: unknown } | undefined;
  for (;;) {
    const left = deadline - Date.now();
    if (client) {
      updateProgress(`waiting up to ${Math.ceil(left / 1000)} s for the reply to run ${runId}…`);
      try {
        const answer = (await client.rpc("agent.wait", { runId, timeoutMs: Math.max(0, left) })) as WaitAnswer;
        // A gateway killed while it answered leaves a body cut short: no answer, ask again.
        if (typeof answer?.status !== "string")
          throw new SwitchboardError("http_error", "the gateway's answer to agent.wait was cut off");
        last = { answer };
        if (answer.status !== "timeout") return last;
      } catch (err) {
        last = { failed: err };
        if (!(err instanceof SwitchboardError && TRANSIENT.has(err.code))) return last;
      }
    }
    if (deadline - Date.now() < MIN_ASK_MS) return last ?? { failed: new Error("no time left to wait") };
    await sleep(Math.min(RETRY_EVERY_MS, Math.max(0, deadline - Date.now() - MIN_ASK_MS)));
    // The gateway that answered before may be gone: find one again (as the command did at first).
    await client?.close().catch(() => undefined);
    client = undefined;
    try {
      client = await connect(opts);
      setClient(client);
    } catch (err) {
      last = { failed: err };
    }
  }
}

/** Calls `fn` on each SIGINT (exit 130) or SIGTERM (143) until the returned function is called. */
function onInterrupt(fn: (signal: NodeJS.Signals, code: number) => void): () => void {
  const int = () => fn("SIGINT", EXIT.interrupted);
  const term = () => fn("SIGTERM", 143);
  process.on("SIGINT", int);
  process.on("SIGTERM", term);
  return () => {
    process.off("SIGINT", int);
    process.off("SIGTERM", term);
  };
}
