/**
 * `POST /v1/tools/<name>`: a client that goes away while sessions_send waits for the target's
 * reply ends the wait at once; the run itself still finishes (as for the other doors:
 * doors-disconnect.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureSession } from "../../src/storage/ensure-session.js";
import { history } from "../helpers/api.js";
import { settle } from "../helpers/settle.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptAgent, toolsConfig } from "../fixtures/tools-support.js";

const TOKEN = "v1-tools-disconnect-token-01";
const MAIN = "agent:main:main";
const BOB = "agent:bob:main";
/** Long enough that a wait still held after the client left is seen, short enough to finish in the test. */
const SLOW_MS = 4000;

let sys: TestSystem;
const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

beforeAll(async () => {
  sys = await startTestSystem(
    toolsConfig({
      gateway: { auth: { token: TOKEN } },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "bob"] } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
      agents: {
        list: [
          scriptAgent(
            "main",
            [
              { when: { contains: "slow" }, delayMs: SLOW_MS, reply: "main slow: {{text}}" },
              { reply: "main: {{text}}" },
            ],
            { default: true },
          ),
          scriptAgent("bob", [
            { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
            { when: { contains: "slow" }, delayMs: SLOW_MS, reply: "bob: {{text}}" },
            { reply: "bob: {{text}}" },
          ]),
        ],
      },
    }),
  );
  for (const key of [MAIN, BOB]) await ensureSession(sys.svc, key);
}, 60_000);

afterAll(async () => {
  await sys?.close();
});

const waiter = () => sys.svc.waiter();

/** Until the door waits, then the client leaves; the wait must be gone well before the run ends. */
async function leaveWhileWaiting(stop: AbortController, what: string): Promise<void> {
  await settle(() => waiter().pendingWaits === 1, { what: `${what} waiting for the run` });
  const leftAt = performance.now();
  stop.abort();
  await settle(() => waiter().pendingWaits === 0, { what: `${what}: the wait released`, timeoutMs: 3000, stepMs: 5 });
  expect(performance.now() - leftAt, what).toBeLessThan(1500);
}

describe("a client that goes away while POST /v1/tools waits", () => {
  it("POST /v1/tools/sessions_send: the wait ends, the run finishes", async () => {
    const stop = new AbortController();
    const request = fetch(`${sys.url}/v1/tools/sessions_send`, {
      method: "POST",
      signal: stop.signal,
      headers: auth,
      body: JSON.stringify({
        sessionKey: MAIN,
        args: { sessionKey: BOB, message: "slow v1 tool", timeoutSeconds: 60 },
      }),
    }).catch((e: Error) => e);
    await leaveWhileWaiting(stop, "/v1/tools");
    expect(await request).toBeInstanceOf(Error);
    await settle(
      async () => (await history(sys, BOB, 50)).some((m) => JSON.stringify(m).includes("bob: slow v1 tool")),
      { what: "bob's reply to the abandoned sessions_send" },
    );
  }, 30_000);
});
