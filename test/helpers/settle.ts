/**
 * Waiting in tests: for a condition, with a deadline, saying what is waited for; or, on purpose,
 * for a fixed quiet window. A test never sleeps "long enough" for something to happen: it waits
 * until it has happened, so it is as fast as the system and fails with a message that names the
 * missing event instead of an assertion about a half-finished state.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface SettleOptions {
  /** What the condition stands for, as the failure message should say it ("run r1 running"). */
  what: string;
  /** Give up after this long (default 15 s: well past any wait here, well inside testTimeout). */
  timeoutMs?: number;
  /** Pause between checks (default 50 ms). */
  stepMs?: number;
}

/**
 * Poll `condition` until it returns a truthy value, and return that value. A throw counts as
 * "not yet" (a record not written yet, a gateway restarting) and is quoted in the failure.
 * Past the deadline: `timed out after <ms> ms waiting for <what>`, with the last value seen.
 */
export async function settle<T>(condition: () => Promise<T> | T, opts: SettleOptions): Promise<NonNullable<T>> {
  const { what, timeoutMs = 15_000, stepMs = 50 } = opts;
  const deadline = Date.now() + timeoutMs;
  let last: { value?: unknown; error?: unknown } = {};
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= deadline) {
      const seen =
        "error" in last
          ? `last error: ${(last.error as Error)?.message ?? String(last.error)}`
          : `last value: ${describe(last.value)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${seen})`);
    }
    await sleep(stepMs);
  }
}

/**
 * A deliberate fixed wait: the window in which something must NOT happen (a second delivery, a
 * rotation, a retry). There is no event to wait for, so the length is the claim: `why` says
 * what the window proves, and the test asserts the "nothing happened" right after it.
 */
export async function quietPeriod(ms: number, why: string): Promise<void> {
  if (!why) throw new Error("quietPeriod needs a reason");
  await sleep(ms);
}

function describe(value: unknown): string {
  try {
    const s = JSON.stringify(value);
    return s === undefined ? String(value) : s.length > 200 ? `${s.slice(0, 200)}…` : s;
  } catch {
    return String(value);
  }
}

/**
 * A deliberate delay that spreads work over time (staggered starts, a paced load): not a wait
 * for anything, so nothing is asserted about the window. `why` says what the spread is for.
 */
export async function pace(ms: number, why: string): Promise<void> {
  if (!why) throw new Error("pace needs a reason");
  await sleep(ms);
}
