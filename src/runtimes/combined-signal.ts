/**
 * A turn's one AbortSignal: its registered controller (a /stop, a hand-back) aborted also when
 * any of the given signals aborts (the lease lost) or after `timeoutMs`, with the first reason.
 * `AbortSignal.any` does this, but on Node 20 it costs ~20 µs a call and keeps its sources
 * alive through weak references; a second AbortController per turn costs microseconds too. So
 * the sources abort the controller the turn already has, through a few listeners removed by the
 * returned function when the turn ends. An already aborted `target` stays as it is.
 */
export function linkSignals(target: AbortController, sources: AbortSignal[], timeoutMs?: number): () => void {
  const already = sources.find((s) => s.aborted);
  if (already) {
    target.abort(already.reason);
    return () => undefined;
  }
  const listeners = sources.map((s) => {
    const on = () => target.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    return () => s.removeEventListener("abort", on);
  });
  let timer: NodeJS.Timeout | undefined;
  if (timeoutMs !== undefined && timeoutMs > 0) {
    timer = setTimeout(
      () => target.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
      timeoutMs,
    );
    timer.unref?.();
  }
  return () => {
    clearTimeout(timer);
    for (const off of listeners) off();
  };
}
