/**
 * Webhook channels: what fetch() would refuse on every delivery (a non-HTTP URL, a header that is
 * not a header) is a config error instead, and a delivery that cannot connect says why.
 */
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { sendThroughChannel } from "../../src/delivery/channel-adapters.js";
import { ConfigError } from "../../src/errors/index.js";

function issues(channels: Record<string, unknown>): string[] {
  try {
    parseConfig({ channels });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe("webhook channel config", () => {
  it("accepts http and https URLs with a host, and ordinary headers", () => {
    expect(
      issues({
        a: { kind: "webhook", url: "http://127.0.0.1:9/x" },
        b: { kind: "webhook", url: "https://hooks.example.com/T0/B0?token=x", headers: { "X-Api-Key": "k v\t1" } },
        c: { kind: "webhook", url: "HTTPS://example.com", headers: { authorization: "Bearer abc", "x_a.b~": "" } },
      }),
    ).toEqual([]);
  });

  it("refuses other schemes and URLs without a host", () => {
    const msg = "must be an http:// or https:// URL with a host";
    expect(
      issues({
        a: { kind: "webhook", url: "ftp://127.0.0.1/x" },
        b: { kind: "webhook", url: "mailto:x@y" },
        c: { kind: "webhook", url: "javascript:alert(1)" },
        d: { kind: "webhook", url: "http:/localhost:9/x" },
        e: { kind: "webhook", url: "not a url" },
        f: { kind: "webhook", url: "http://" },
      }),
    ).toEqual([
      `channels.a.url: ${msg} (got a ftp: URL)`,
      `channels.b.url: ${msg} (got a mailto: URL)`,
      `channels.c.url: ${msg} (got a javascript: URL)`,
      `channels.d.url: ${msg} (got a http: URL)`,
      `channels.e.url: ${msg}`,
      `channels.f.url: ${msg}`,
    ]);
  });

  it("refuses header names that are not tokens and values with control characters, naming the header", () => {
    expect(
      issues({
        h: {
          kind: "webhook",
          url: "http://127.0.0.1:9/x",
          headers: { "bad header": "v", "x-ok": "fine", "x-colon:": "v", "x-split": "a\r\nInjected: 1", "x-nul": "\0" },
        },
      }),
    ).toEqual([
      expect.stringMatching(/^channels\.h\.headers\.bad header: not a valid header name/),
      expect.stringMatching(/^channels\.h\.headers\.x-colon:: not a valid header name/),
      expect.stringMatching(/^channels\.h\.headers\.x-split: not a valid header value/),
      expect.stringMatching(/^channels\.h\.headers\.x-nul: not a valid header value/),
    ]);
  });
});

describe("webhook delivery errors", () => {
  it("say why fetch failed (the cause), not only 'fetch failed'", async () => {
    // A port that was free a moment ago: nothing listens on it, so the connection is refused.
    const port = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen(0, "127.0.0.1", () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const cfg = parseConfig({ channels: { w: { kind: "webhook", url: `http://127.0.0.1:${port}/x` } } }).channels.w!;
    const msg = { id: "d1", message: "hi", sessionKey: "agent:main:main", kind: "reply", channel: "w" };
    await expect(sendThroughChannel(cfg, msg)).rejects.toThrow(
      new RegExp(`^fetch failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`),
    );
  });
});
