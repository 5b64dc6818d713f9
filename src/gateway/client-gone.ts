/**
 * A signal aborted when the client of an HTTP request goes away before its answer is complete.
 *
 * The response's 'close' is the one event that says so for every kind of answer (a body sent at
 * once, a hijacked stream): it fires when the connection drops, and also after a complete answer,
 * which is told apart by `writableEnded` (the answer was ended by the server). The request's own
 * 'close' is no use: Node fires it as soon as the body has been read. A wait holding the signal
 * ends at once instead of keeping its timer, its place on the run-done subscription and its
 * Redis reads until the run ends; the run itself goes on.
 */
import type { ServerResponse } from "node:http";

export interface ClientGone {
  signal: AbortSignal;
  /** Stop listening (the answer is out; nothing is left to abort). */
  dispose(): void;
}

export function clientGoneSignal(res: ServerResponse): ClientGone {
  const ac = new AbortController();
  const onClose = () => {
    if (!res.writableEnded) ac.abort(new Error("client disconnected"));
  };
  // Already gone before we listen: 'close' will not come again.
  if (res.destroyed && !res.writableEnded) ac.abort(new Error("client disconnected"));
  else res.once("close", onClose);
  return { signal: ac.signal, dispose: () => res.off("close", onClose) };
}
