/**
 * A push whose answer is lost with its connection: ioredis sends the unanswered command again
 * after it reconnects, so the push script runs twice. A TCP proxy in front of the test Redis holds
 * back the answer to the `agent` RPC's push and then drops the connection. The turn must be
 * queued once, and the call, which had no idempotency key, must not be told it was a duplicate
 * (it was: `duplicate: true`, because the second run of the script found the runId it had just
 * created).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { scriptConfig } from "../fixtures/runs-support.js";
import { newRedis, testRedisUrl } from "../helpers/context.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";

let proxy: TcpProxy;
let sys: TestSystem;
let admin: Redis;

beforeAll(async () => {
  proxy = await startTcpProxy(Number(new URL(testRedisUrl()).port));
  // A gateway without workers: the turns stay in the inbox, where they can be counted.
  sys = await startTestSystem(scriptConfig([{ reply: "re: {{text}}" }], { redis: { url: proxy.url } }), {
    gateway: true,
    workers: false,
  });
  admin = newRedis();
});

afterAll(async () => {
  admin?.disconnect();
  await sys?.close();
  await proxy?.close();
});

/** The texts queued in a session's inbox, in order. */
async function inboxTexts(sessionKey: string): Promise<string[]> {
  const raw = await admin.lrange(sys.svc.keys.inbox(sessionKey), 0, -1);
  return raw.map((t) => (JSON.parse(t) as { text: string }).text);
}

/** Runs the `agent` RPC with the answer to its push lost once, and returns the RPC's answer. */
async function agentWithLostPushAnswer(params: Record<string, unknown>): Promise<any> {
  const inbox = sys.svc.keys.inbox(`agent:main:${params.sessionKey as string}`);
  const held = proxy.holdRepliesWhen((sent) => sent.includes(inbox));
  const call = sys.post("/v1/rpc/agent", params);
  await held;
  proxy.dropAll();
  const res = await call;
  expect(res.status).toBe(200);
  return res.body;
}

describe("a push sent again after its answer was lost", () => {
  it("queues the turn once and answers as for any first call", async () => {
    const first = await sys.rpc("agent", { sessionKey: "resent", message: "one" });
    expect(first.duplicate).toBeUndefined();

    const body = await agentWithLostPushAnswer({ sessionKey: "resent", message: "two" });
    expect(body.ok).toBe(true);
    expect(body.result.duplicate).toBeUndefined();
    expect(await inboxTexts("agent:main:resent")).toEqual(["one", "two"]);
    expect(await sys.svc.runs.get(body.result.runId)).toMatchObject({ status: "queued" });
  });

  it("with an idempotency key a real retry is still told it is a duplicate, and nothing is queued twice", async () => {
    const params = { sessionKey: "resent-idem", message: "once", idempotencyKey: "k-1" };
    const body = await agentWithLostPushAnswer(params);
    // The resent push cannot be told from a retry here: the runId comes from the key.
    expect(body.ok).toBe(true);
    const retry = await sys.rpc("agent", params);
    expect(retry).toMatchObject({ runId: body.result.runId, duplicate: true });
    expect(await inboxTexts("agent:main:resent-idem")).toEqual(["once"]);
  });
});
