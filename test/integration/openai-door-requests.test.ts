/**
 * The OpenAI door's checks before a turn is queued: a request the sendPolicy refuses leaves no
 * session behind; a session-key header of another agent than the one the request named is
 * refused (the completion would name one agent while another ran), and the answer names the agent
 * that ran; a bad `user` is refused naming the field and its own index, and a `user` or header
 * key that would read as a sub-agent's session is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpJson, startTestSystem, type TestSystem } from "../helpers/system.js";

const TOKEN = "openai-door-requests-token";
let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { auth: { token: TOKEN } },
    session: {
      reset: { mode: "off" },
      sendPolicy: { rules: [{ action: "deny", match: { rawKeyPrefix: "agent:main:openai:" } }] },
    },
    agents: {
      defaults: { runtime: { kind: "script", rules: [{ reply: "defaults|{{agentId}}|{{sessionKey}}" }] } },
      list: [
        { id: "main", default: true },
        { id: "ops", runtime: { kind: "script", rules: [{ reply: "ops-runtime|{{sessionKey}}" }] } },
      ],
    },
  });
});

afterAll(async () => {
  await sys?.close();
});

/** POST /v1/chat/completions; `headers` sent as UTF-8 bytes (as clients send them). */
async function complete(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const wire = Object.fromEntries(
    Object.entries(headers).map(([k, v]) => [k, Buffer.from(v, "utf8").toString("latin1")]),
  );
  return await httpJson(
    "POST",
    `${sys.url}/v1/chat/completions`,
    { messages: [{ role: "user", content: "hi" }], ...body },
    { authorization: `Bearer ${TOKEN}`, ...wire },
  );
}

describe("sendPolicy deny", () => {
  it("a refused stateless request creates no session", async () => {
    const before = await sys.svc.sessions.count("main");
    for (let i = 0; i < 5; i++) {
      const r = await complete({ model: "main" });
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("send_blocked");
    }
    // With an Idempotency-Key the session it would have used is known: it does not exist.
    const r = await complete({ model: "main" }, { "idempotency-key": "refused-1" });
    expect(r.status).toBe(403);
    expect(await sys.svc.sessions.count("main")).toBe(before);
    // An allowed request still creates its session.
    const ok = await complete({ model: "main", user: "allowed" });
    expect(ok.status).toBe(200);
    expect(await sys.svc.sessions.count("main")).toBe(before + 1);
  });
});

describe("which agent runs, and which the answer names", () => {
  it("a session-key header of another agent than the model names is a 400 naming both; nothing runs", async () => {
    const before = await sys.svc.sessions.count("main");
    const r = await complete({ model: "ops" }, { "x-switchboard-session-key": "agent:main:room1" });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "invalid_request", param: "model", type: "invalid_request_error" });
    expect(r.body.error.message).toContain("'main'");
    expect(r.body.error.message).toContain("'ops'");
    expect(r.body.error.message).toContain("agent:main:room1");
    expect(await sys.svc.sessions.get("agent:main:room1")).toBeNull();
    expect(await sys.svc.sessions.count("main")).toBe(before);
    // The same with the agent named by header: the header is the param at fault.
    const byHeader = await complete(
      { model: "main" },
      { "x-openclaw-agent-id": "ops", "x-openclaw-session-key": "agent:main:room1" },
    );
    expect(byHeader.status).toBe(400);
    expect(byHeader.body.error.param).toBe("x-openclaw-agent-id");
    expect(byHeader.body.error.message).toContain("x-openclaw-session-key");
  });

  it("the same agent both ways runs as before, the answer in the client's spelling", async () => {
    const r = await complete({ model: "switchboard/ops" }, { "x-switchboard-session-key": "agent:ops:room2" });
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe("ops-runtime|agent:ops:room2");
    expect(r.body.model).toBe("switchboard/ops");
    const bare = await complete({ model: "ops" }, { "x-switchboard-session-key": "room3" });
    expect(bare.body.choices[0].message.content).toBe("ops-runtime|agent:ops:room3");
    expect(bare.body.model).toBe("ops");
  });

  it("no agent asked for: the key's agent runs and is named (unconfigured: on agents.defaults.runtime)", async () => {
    const ops = await complete({ model: "openclaw/default" }, { "x-switchboard-session-key": "agent:ops:room4" });
    expect(ops.status).toBe(200);
    expect(ops.body.choices[0].message.content).toBe("ops-runtime|agent:ops:room4");
    expect(ops.body.model).toBe("switchboard/ops");
    const typo = await complete({}, { "x-switchboard-session-key": "agent:typo:room" });
    expect(typo.status).toBe(200);
    expect(typo.body.choices[0].message.content).toBe("defaults|typo|agent:typo:room");
    expect(typo.body.model).toBe("switchboard/typo");
  });

  it("an agent-id header over the model: the answer names the agent that ran, not the model", async () => {
    const r = await complete({ model: "main", user: "hdr" }, { "x-switchboard-agent-id": "ops" });
    expect(r.body.choices[0].message.content).toBe("ops-runtime|agent:ops:openai-user:hdr");
    expect(r.body.model).toBe("switchboard/ops");
  });
});

describe("a bad user or session key", () => {
  it("an unsafe character in user: named by field and its own index, once", async () => {
    for (const [user, name, index] of [
      ["a\u0000b", "U+0000 NULL", 1],
      ["\u202Eevil", "U+202E RIGHT-TO-LEFT OVERRIDE", 0],
    ] as const) {
      const r = await complete({ model: "main", user });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe("user");
      expect(r.body.error.message).toBe(`invalid chat completion request: user contains ${name} at index ${index}`);
    }
  });

  it("an unsafe character in the session-key header: named by header and its own index, once", async () => {
    const r = await complete({ model: "main" }, { "x-switchboard-session-key": "room\u202Ex" });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe("x-switchboard-session-key");
    expect(r.body.error.message).toBe("x-switchboard-session-key contains U+202E RIGHT-TO-LEFT OVERRIDE at index 4");
  });

  it("a user that would make a sub-agent's key is refused; nothing is created", async () => {
    const before = await sys.svc.sessions.count("main");
    for (const user of ["x:subagent:y", "SubAgent:y", "a:b:subagent:c"]) {
      const r = await complete({ model: "main", user });
      expect(r.status, user).toBe(400);
      expect(r.body.error.param).toBe("user");
      expect(r.body.error.message).toMatch(/subagent/);
    }
    expect(await sys.svc.sessions.count("main")).toBe(before);
    // Not a sub-agent's key: a user called "subagent", or with the word inside a segment.
    for (const user of ["subagent", "my-subagent:x"]) {
      const r = await complete({ model: "main", user });
      expect(r.status, user).toBe(200);
    }
  });

  it("a header key with a subagent segment out of place is refused; a sub-agent's own key is not", async () => {
    const stray = await complete({ model: "main" }, { "x-switchboard-session-key": "agent:main:dm:bob:subagent:x" });
    expect(stray.status).toBe(400);
    expect(stray.body.error).toMatchObject({ code: "invalid_session_key", param: "x-switchboard-session-key" });
    expect(await sys.svc.sessions.get("agent:main:dm:bob:subagent:x")).toBeNull();
    const own = await complete({ model: "main" }, { "x-switchboard-session-key": "agent:main:subagent:abc" });
    expect(own.status).toBe(200);
  });
});
