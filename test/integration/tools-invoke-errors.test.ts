/**
 * `POST /tools/invoke` answers every error in one shape, OpenClaw's `{ ok:false, error:{ type,
 * message } }`: those of the handler (bad request, unknown tool, a message over the limit) and
 * those the gateway gives before it (401, a body over the body limit, bad JSON). The other
 * endpoints keep the gateway's own shape.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpJson, startTestSystem, type TestSystem } from "../helpers/system.js";

const TOKEN = "tools-invoke-errors-token";
const MESSAGE_BYTES = 2048;
const BODY_BYTES = 8192;

let sys: TestSystem;
const auth = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  sys = await startTestSystem({
    gateway: { auth: { token: TOKEN }, limits: { messageBytes: MESSAGE_BYTES, bodyBytes: BODY_BYTES } },
  });
});

afterAll(async () => {
  await sys?.close();
});

const invoke = (body: unknown, headers: Record<string, string> = auth) =>
  httpJson("POST", `${sys.url}/tools/invoke`, body, headers);

/** The door's one error shape, with `type` as given. */
function expectShape(r: { status: number; body: any }, status: number, type: string): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.body).toMatchObject({ ok: false, error: { type, message: expect.any(String) } });
  expect(Object.keys(r.body)).toEqual(["ok", "error"]);
  expect(r.body.error).not.toHaveProperty("code");
}

describe("POST /tools/invoke errors", () => {
  it("a message over the limit and a body over the body limit: both 413 payload_too_large, with limits", async () => {
    const overMessage = await invoke({
      tool: "sessions_send",
      args: { sessionKey: "main", message: "x".repeat(MESSAGE_BYTES + 1) },
    });
    expectShape(overMessage, 413, "payload_too_large");
    expect(overMessage.body.error).toMatchObject({ limitBytes: MESSAGE_BYTES, field: "args.message" });

    const overBody = await invoke({
      tool: "sessions_send",
      args: { sessionKey: "main", message: "x".repeat(BODY_BYTES + 10) },
    });
    expectShape(overBody, 413, "payload_too_large");
    expect(overBody.body.error).toMatchObject({ limitBytes: MESSAGE_BYTES, bodyLimitBytes: BODY_BYTES });
  });

  it("bad JSON, a bad request, no token, an unknown tool, another method: the same shape", async () => {
    expectShape(await invoke("{bad"), 400, "invalid_request");
    expectShape(await invoke({ args: {} }), 400, "invalid_request");
    expectShape(await invoke({ tool: "sessions_list" }, {}), 401, "unauthorized");
    expectShape(
      await invoke({ tool: "sessions_list" }, { authorization: "Bearer wrong-token-0000" }),
      401,
      "unauthorized",
    );
    expectShape(await invoke({ tool: "exec", args: {} }), 404, "not_found");
    expectShape(await httpJson("GET", `${sys.url}/tools/invoke`, undefined, auth), 405, "method_not_allowed");
    expectShape(await httpJson("GET", `${sys.url}/tools/invoke`, undefined, {}), 401, "unauthorized");
  });

  it("answers as before when all is well; other endpoints keep the gateway's shape", async () => {
    const ok = await invoke({ tool: "sessions_list", args: { limit: 1 } });
    expect(ok.status).toBe(200);
    expect(ok.body.ok).toBe(true);
    const rpc = await httpJson("POST", `${sys.url}/v1/rpc/sessions.list`, {}, {});
    expect(rpc.status).toBe(401);
    expect(rpc.body).toMatchObject({ ok: false, error: { code: "unauthorized" } });
  });
});
