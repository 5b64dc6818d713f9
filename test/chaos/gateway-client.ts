/**
 * HTTP client of the chaos suite: a call goes to its preferred gateway and, when that gateway
 * does not answer (connection refused or reset, timed out, 5xx), is retried with a short
 * backoff, alternating between the gateways, until an answer or a deadline. Retries re-send the
 * very same body, so they are safe only with an idempotency key / messageId in it (the callers
 * make sure of that). It counts what it saw, for the assertions and the summary.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface CallOutcome {
  /** The answer, or undefined when the deadline passed without one. */
  status?: number;
  body?: any;
  /** HTTP attempts made (1 = answered at once). */
  attempts: number;
  /** Attempts that failed without an answer, by reason (e.g. "network", "timeout", "http 500"). */
  failures: string[];
  /** The gateway index that answered. */
  gateway?: number;
  /** When the attempt that got the answer was sent (Date.now()). */
  answeredAttemptAt?: number;
}

export interface CallOptions {
  /** Index into the gateway list tried first. */
  preferred: number;
  /** Per-attempt timeout. */
  attemptTimeoutMs: number;
  /** Give up (answer undefined) after this long in total. */
  deadlineMs: number;
}

export class GatewayClient {
  /** Attempts in progress by gateway and path (the chaos controller kills a gateway while some wait). */
  private readonly inFlight = new Map<string, number>();
  /** Per path: calls that needed more than one attempt. */
  readonly retriedCalls = new Map<string, number>();

  constructor(private readonly urls: readonly string[]) {}

  pending(gateway: number, path: string): number {
    return this.inFlight.get(`${gateway} ${path}`) ?? 0;
  }

  async call(path: string, body: unknown, opts: CallOptions): Promise<CallOutcome> {
    const failures: string[] = [];
    const deadline = Date.now() + opts.deadlineMs;
    let gateway = opts.preferred;
    for (let attempt = 1; ; attempt++) {
      const sentAt = Date.now();
      const reason = await this.attempt(gateway, path, body, opts.attemptTimeoutMs);
      if (typeof reason !== "string") {
        if (attempt > 1) this.retriedCalls.set(path, (this.retriedCalls.get(path) ?? 0) + 1);
        return {
          status: reason.status,
          body: reason.body,
          attempts: attempt,
          failures,
          gateway,
          answeredAttemptAt: sentAt,
        };
      }
      failures.push(reason);
      if (Date.now() > deadline) return { attempts: attempt, failures };
      gateway = (gateway + 1) % this.urls.length;
      // Back off a little more each round, so a Redis outage is not hammered.
      await sleep(Math.min(50 * attempt, 500));
    }
  }

  /** One HTTP attempt: the answer, or why there was none. */
  private async attempt(
    gateway: number,
    path: string,
    body: unknown,
    timeoutMs: number,
  ): Promise<{ status: number; body: any } | string> {
    const slot = `${gateway} ${path}`;
    this.inFlight.set(slot, this.pending(gateway, path) + 1);
    try {
      const res = await fetch(this.urls[gateway] + path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      if (res.status >= 500) return `http ${res.status}`;
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // kept as text: the caller reports it
      }
      return { status: res.status, body: parsed };
    } catch (err) {
      return (err as Error).name === "TimeoutError" ? "timeout" : "network";
    } finally {
      this.inFlight.set(slot, this.pending(gateway, path) - 1);
    }
  }
}
