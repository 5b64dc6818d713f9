/**
 * One AbortSignal that aborts when any of the given ones does (or after `timeoutMs`), with the
 * first reason. `AbortSignal.any` does this, but on Node 20 it costs ~20 µs a call and keeps its
 * sources alive through weak references: too much for every turn. This one is a controller and
 * a few listeners, removed by `dispose()` when the turn ends.
 */
export interface CombinedSignal {
  signal: AbortSignal;
  dispose(): void;
}

export function combineSignals(sources: AbortSignal[], timeoutMs?: number): CombinedSignal {
  const controller = new AbortController();
  const already = sources.find((s) => s.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, dispose: () => undefined };
  }
  const listeners = sources.map((s) => {
    const on = () => controller.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    return () => s.removeEventListener("abort", on);
  });
  let timer: NodeJS.Timeout | undefined;
  if (timeoutMs !== undefined && timeoutMs > 0) {
    timer = setTimeout(
      () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
      timeoutMs,
    );
    timer.unref?.();
  }
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      for (const off of listeners) off();
    },
  };
}
