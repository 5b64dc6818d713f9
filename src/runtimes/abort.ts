import { RunAbortedError } from "./types.js";

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new RunAbortedError(signal.reason);
}

/**
 * Waits for `promise` but gives up with RunAbortedError the moment `signal` aborts (a tool
 * invoker or HTTP client that ignores the signal must not hold a killed run). A late rejection
 * of the abandoned promise is swallowed.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new RunAbortedError(signal.reason));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      promise.catch(() => undefined);
      reject(new RunAbortedError(signal.reason));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
