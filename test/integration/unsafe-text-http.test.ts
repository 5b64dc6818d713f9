/**
 * Keys, agent ids and labels with control, bidi or invisible characters are refused at every
 * HTTP entry with a 400 whose message names the character and its index
 * (src/session/unsafe-chars.ts, docs/concepts/unsafe-text.md).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({}, { gateway: true, workers: false });
});

afterAll(async () => {
  await sys?.close();
});

const RLO = "\u202E";

describe("unsafe characters over HTTP", () => {
  it.each<[label: string, path: string, body: unknown, message: string]>([
    [
      "inbound from",
      "/v1/inbound",
      { channel: "web", chatType: "dm", from: `mal${RLO}lory`, text: "hi" },
      "from contains U+202E RIGHT-TO-LEFT OVERRIDE at index 3",
    ],
    [
      "inbound groupId",
      "/v1/inbound",
      { channel: "web", chatType: "group", from: "a", groupId: "g\u2066", text: "hi" },
      "groupId contains U+2066 LEFT-TO-RIGHT ISOLATE at index 1",
    ],
    [
      "inbound threadId",
      "/v1/inbound",
      { channel: "web", chatType: "dm", from: "a", threadId: "t\u0007", text: "hi" },
      "threadId contains U+0007 BELL at index 1",
    ],
    [
      "agent sessionKey",
      "/v1/rpc/agent",
      { sessionKey: `agent:main:x${RLO}`, message: "hi" },
      "sessionKey: session key contains U+202E RIGHT-TO-LEFT OVERRIDE at index 12",
    ],
    [
      "agent agentId",
      "/v1/rpc/agent",
      { agentId: "ops\u200B", message: "hi" },
      "agentId contains U+200B ZERO WIDTH SPACE at index 3",
    ],
    [
      "sessions.patch label",
      "/v1/rpc/sessions.patch",
      { key: "main", label: `${RLO}gpj.exe` },
      "label contains U+202E RIGHT-TO-LEFT OVERRIDE at index 0",
    ],
    [
      "sessions.resolve label",
      "/v1/rpc/sessions.resolve",
      { label: "a\u2069" },
      "label contains U+2069 POP DIRECTIONAL ISOLATE at index 1",
    ],
    [
      "sessions.list agentId",
      "/v1/rpc/sessions.list",
      { agentId: "\u200Fmain" },
      "agentId contains U+200F RIGHT-TO-LEFT MARK at index 0",
    ],
    [
      "send channel",
      "/v1/rpc/send",
      { channel: "web\u0085", message: "x" },
      "channel contains U+0085 NEXT LINE at index 3",
    ],
    [
      "deliveries.list sessionKey",
      "/v1/rpc/deliveries.list",
      { sessionKey: "a\uFEFFb" },
      "session key contains U+FEFF ZERO WIDTH NO-BREAK SPACE at index 1",
    ],
    [
      "tool request sessionKey",
      "/v1/tools/sessions_list",
      { sessionKey: `main${RLO}` },
      "sessionKey contains U+202E RIGHT-TO-LEFT OVERRIDE at index 4",
    ],
  ])("%s → 400 naming the character", async (_label, path, body, message) => {
    const r = await sys.post(path, body);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.ok).toBe(false);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.message).toContain(message);
  });

  it("GET /v1/deliveries?sessionKey=… with an override → 400", async () => {
    const r = await sys.get(`/v1/deliveries?sessionKey=${encodeURIComponent(`main${RLO}`)}`);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("U+202E RIGHT-TO-LEFT OVERRIDE at index 4");
  });

  it("a tool argument with an override is a tool error naming it (tools answer, they do not throw)", async () => {
    const r = await sys.post("/v1/tools/sessions_send", {
      sessionKey: "main",
      args: { label: `x${RLO}`, message: "hi", timeoutSeconds: 0 },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "error" });
    expect(r.body.error).toContain("label contains U+202E RIGHT-TO-LEFT OVERRIDE at index 1");
  });

  it("labels keep emoji joiners and scripts that need ZWNJ; keys stay usable with ordinary Unicode", async () => {
    const created = await sys.rpc("agent", { sessionKey: "cron:ünïcödé-日本", message: "hi" });
    expect(created.sessionKey).toBe("agent:main:cron:ünïcödé-日本");
    const patched = await sys.rpc("sessions.patch", { key: "cron:ünïcödé-日本", label: "می‌خواهم 👨‍👩‍👧" });
    expect(patched.entry.label).toBe("می‌خواهم 👨‍👩‍👧");
  });
});
