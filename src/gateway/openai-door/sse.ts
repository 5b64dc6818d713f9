/**
 * Server-sent events as OpenAI streams them: `data: <json>` events, `data: [DONE]` last. While
 * the turn runs, comment lines keep proxies and clients from timing the connection out.
 */
import type { ServerResponse } from "node:http";

export const KEEP_ALIVE_MS = 15_000;

export class SseWriter {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    headers: Record<string, string>,
    keepAliveMs = KEEP_ALIVE_MS,
  ) {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      // Nginx and similar proxies: pass events on as they come.
      "x-accel-buffering": "no",
      ...headers,
    });
    this.timer = setInterval(() => this.comment("keep-alive"), keepAliveMs);
    this.timer.unref();
    res.once("close", () => this.stopKeepAlive());
  }

  /** False once the client went away (the turn goes on; its reply stays in the transcript). */
  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  data(value: unknown): void {
    if (this.open) this.res.write(`data: ${JSON.stringify(value)}\n\n`);
  }

  comment(text: string): void {
    if (this.open) this.res.write(`: ${text}\n\n`);
  }

  /** `data: [DONE]` and the end of the response. */
  done(): void {
    this.stopKeepAlive();
    if (!this.open) return;
    this.res.write("data: [DONE]\n\n");
    this.res.end();
  }

  private stopKeepAlive(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
