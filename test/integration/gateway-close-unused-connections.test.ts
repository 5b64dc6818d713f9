/**
 * A closing gateway does not wait on connections that carry no request: one that never sent a
 * request (an HTTP client's spare connection: undici opens one when a request is aborted; a load
 * balancer's preconnect) or one still sending its headers. Node counts them as busy, so
 * closeIdleConnections leaves them, and the close used to wait until the client dropped them or
 * Node's headers timeout ended them (~60 s). A request in flight is still answered.
 */
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { settle } from "../helpers/settle.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

const TOKEN = "gateway-close-unused-token-01";

let sys: TestSystem;
const sockets: Socket[] = [];

beforeAll(async () => {
  sys = await startTestSystem({ gateway: { auth: { token: TOKEN } } }, { gateway: true, workers: false });
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await sys?.close();
});

/** A raw connection to the gateway, with what it has received and whether the server ended it. */
async function open(): Promise<{ socket: Socket; received: () => string; ended: () => boolean }> {
  const url = new URL(sys.url);
  const socket = connect(Number(url.port), url.hostname);
  sockets.push(socket);
  let got = "";
  socket.setEncoding("utf8");
  socket.on("data", (d: string) => (got += d));
  let ended = false;
  socket.once("close", () => (ended = true));
  await new Promise<void>((r, j) => socket.once("connect", r).once("error", j));
  return { socket, received: () => got, ended: () => ended };
}

const serverConnections = () =>
  new Promise<number>((r, j) => sys.gateway!.app.server.getConnections((e, n) => (e ? j(e) : r(n))));

describe("a closing gateway and connections without a request", () => {
  it("ends them at once; a request in flight is answered", async () => {
    const silent = await open();
    const halfHeaders = await open();
    halfHeaders.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n");
    // In flight: headers complete, the body still coming (the handler has not run yet).
    const body = JSON.stringify({});
    const inFlight = await open();
    inFlight.socket.write(
      "POST /v1/rpc/no.such.method HTTP/1.1\r\nhost: x\r\n" +
        `authorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\n` +
        `content-length: ${body.length}\r\n\r\n`,
    );
    await settle(async () => (await serverConnections()) === 3, { what: "the gateway holding the 3 connections" });
    // Give the parser time to see the partial headers and the in-flight request's headers.
    await sleep(100);

    const started = performance.now();
    let closed = false;
    const closing = sys.gateway!.close().then(() => (closed = true));
    await settle(() => silent.ended() && halfHeaders.ended(), {
      what: "the gateway ending the connections without a request",
      timeoutMs: 2000,
      stepMs: 10,
    });
    expect(silent.received()).toBe("");
    // The request in flight holds the close until it is answered, then the close completes.
    await sleep(200);
    expect(closed).toBe(false);
    inFlight.socket.write(body);
    await Promise.race([closing, sleep(5000)]);
    expect(closed, "the gateway closed once the request in flight was answered").toBe(true);
    expect(performance.now() - started).toBeLessThan(5000);
    expect(inFlight.received()).toMatch(/^HTTP\/1\.1 404 /);
    expect(inFlight.received()).toContain('"code":"not_found"');
  }, 30_000);
});
