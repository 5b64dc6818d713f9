/**
 * One OpenAI SDK call is one turn. The SDK retries a 5xx (and a connection that timed out) up to
 * `maxRetries` times: the door answers every request whose turn it queued with
 * `x-should-retry: false`, so a failed, killed or timed-out turn is not queued again, and it
 * honours `Idempotency-Key`, so a retry the client makes anyway finds the first turn.
 * Driven by the `openai` npm client (default retries) against a whole Switchboard, real Redis.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { userTexts as transcriptUserTexts } from "../helpers/api.js";

const TOKEN = "openai-retries-token-0123";

let sys: TestSystem;
/** POSTs to /v1/chat/completions the clients below sent, retries included. */
let requests = 0;
let client: OpenAI;

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { auth: { token: TOKEN }, openai: { waitTimeoutSeconds: 1 } },
    maintenance: { sweepEveryMs: 3_600_000 },
    agents: {
      defaults: {
        runtime: {
          kind: "script",
          rules: [
            { when: { contains: "boom" }, fail: "kaboom" },
            { when: { contains: "linger" }, delayMs: 20_000, reply: "lingered" },
            { when: { contains: "slow" }, delayMs: 1_800, reply: "slow done" },
            { reply: "re: {{text}}" },
          ],
        },
      },
    },
  });
  client = newClient();
});

afterAll(async () => {
  await sys?.close();
});

/** The SDK as an application uses it: its default retries, a fetch that counts the requests. */
function newClient(opts: { timeout?: number } = {}): OpenAI {
  return new OpenAI({
    baseURL: `${sys.url}/v1`,
    apiKey: TOKEN,
    timeout: opts.timeout ?? 20_000,
    fetch: async (url, init) => {
      if (String(url).endsWith("/chat/completions")) requests++;
      return await fetch(url, init);
    },
  });
}

/** Requests sent while `fn` ran. */
async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; requests: number }> {
  const before = requests;
  const result = await fn();
  return { result, requests: requests - before };
}

const userTexts = (sessionKey: string) => transcriptUserTexts(sys, sessionKey);

describe("answers about a queued turn say x-should-retry: false", () => {
  it("a failed run: one request, one turn, and the SDK does not retry", async () => {
    const { result: err, requests: sent } = await counted(() =>
      client.chat.completions
        .create({ model: "main", user: "fails", messages: [{ role: "user", content: "boom" }] })
        .catch((e: unknown) => e),
    );
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("run_error");
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get("x-should-retry")).toBe("false");
    expect(sent).toBe(1);
    expect(await userTexts("agent:main:openai-user:fails")).toEqual(["boom"]);
  });

  it("a run that outlasts the wait: 504 once; the turn goes on and lands once", async () => {
    const { result: err, requests: sent } = await counted(() =>
      client.chat.completions
        .create({ model: "main", user: "waits", messages: [{ role: "user", content: "slow one" }] })
        .catch((e: unknown) => e),
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("timeout");
    expect(sent).toBe(1);
    const runId = (err as InstanceType<typeof OpenAI.APIError>).headers?.get("x-switchboard-run-id");
    await settle(async () => ((await sys.get(`/v1/runs/${runId}`)).body.status === "ok" ? true : null), {
      what: "the timed-out turn finishing",
    });
    expect(await userTexts("agent:main:openai-user:waits")).toEqual(["slow one"]);
  });

  it("a run killed by a reset: one request, and the stopped message is not sent again", async () => {
    const key = "agent:main:openai-user:killed";
    const call = counted(() =>
      client.chat.completions
        .create({ model: "main", user: "killed", messages: [{ role: "user", content: "linger here" }] })
        .catch((e: unknown) => e),
    );
    await settle(() => sys.workers!.running.held().some((h) => h.sessionKey === key), { what: "the turn running" });
    await sys.rpc("sessions.reset", { key });
    const { result: err, requests: sent } = await call;
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("run_killed");
    expect(sent).toBe(1);
    // A retry would have queued the message again, into the session the reset started.
    expect(await userTexts(key)).toEqual([]);
  });

  it("a stream carries it too (its errors travel inside a 200)", async () => {
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "main", stream: true, messages: [{ role: "user", content: "boom" }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-should-retry")).toBe("false");
    expect(await res.text()).toMatch(/"code":"run_error"/);
  });

  it("a request refused before anything is queued keeps the SDK's usual retry decision", async () => {
    const res = await fetch(`${sys.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "nobody", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("x-should-retry")).toBeNull();
  });
});

describe("Idempotency-Key", () => {
  it("a retry of a timed-out turn waits on the same run and answers its reply", async () => {
    const headers = { "Idempotency-Key": "order-42" };
    const body = { model: "main", user: "idem", messages: [{ role: "user" as const, content: "slow two" }] };
    const first = await client.chat.completions.create(body, { headers }).catch((e: unknown) => e);
    expect((first as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
    const runId = (first as InstanceType<typeof OpenAI.APIError>).headers?.get("x-switchboard-run-id");
    // The application tries again with the same key: the first turn's reply, not a second turn.
    const again = await settle(() => client.chat.completions.create(body, { headers }).catch(() => null), {
      what: "the retried call answering the first run's reply",
    });
    expect(again.id).toBe(`chatcmpl-${runId}`);
    expect(again.choices[0]!.message.content).toBe("slow done");
    expect(await userTexts("agent:main:openai-user:idem")).toEqual(["slow two"]);
    // The runId is the agent RPC's for the same session and key: the same turn at either door.
    const viaRpc = await sys.rpc("agent", {
      sessionKey: "agent:main:openai-user:idem",
      idempotencyKey: "order-42",
      message: "slow two",
    });
    expect(viaRpc).toMatchObject({ runId, duplicate: true });
  });

  it("the SDK's own retries after a client-side timeout land on one turn, even without `user`", async () => {
    const impatient = newClient({ timeout: 300 });
    const headers = { "Idempotency-Key": "stateless-7" };
    const body = { model: "main", messages: [{ role: "user" as const, content: "slow three" }] };
    const { requests: sent } = await counted(() =>
      impatient.chat.completions.create(body, { headers }).catch((e: unknown) => e),
    );
    expect(sent).toBe(3);
    // A stateless call with a key gets a session derived from it: the retries found one session.
    const { data, response } = await client.chat.completions.create(body, { headers }).withResponse();
    expect(data.choices[0]!.message.content).toBe("slow done");
    const sessionKey = response.headers.get("x-switchboard-session-key")!;
    expect(sessionKey).toMatch(/^agent:main:openai:[0-9a-f-]{36}$/);
    expect(await userTexts(sessionKey)).toEqual(["slow three"]);
  });

  it("is scoped to the session: the same key in another session is another turn", async () => {
    const headers = { "Idempotency-Key": "shared-key" };
    const a = await client.chat.completions.create(
      { model: "main", user: "scope-a", messages: [{ role: "user", content: "hello a" }] },
      { headers },
    );
    const b = await client.chat.completions.create(
      { model: "main", user: "scope-b", messages: [{ role: "user", content: "hello b" }] },
      { headers },
    );
    expect(a.id).not.toBe(b.id);
    expect(b.choices[0]!.message.content).toBe("re: hello b");
  });
});
