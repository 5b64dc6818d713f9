/** Tool argument schemas at the edge (src/tools/schemas.ts): unsafe characters and bounded waits. */
import { describe, expect, it } from "vitest";
import {
  MAX_RUN_TIMEOUT_SECONDS,
  MAX_SEND_WAIT_SECONDS,
  SessionsHistoryArgs,
  SessionsListArgs,
  SessionsSendArgs,
  SessionsSpawnArgs,
  SessionStatusArgs,
} from "../../src/tools/schemas.js";

describe("tool argument schemas", () => {
  it("clamp sessions_send timeoutSeconds so no timer gets a value it cannot hold", () => {
    expect(SessionsSendArgs.parse({ message: "x", timeoutSeconds: 1e308 }).timeoutSeconds).toBe(MAX_SEND_WAIT_SECONDS);
    expect(SessionsSendArgs.parse({ message: "x", timeoutSeconds: 12.7 }).timeoutSeconds).toBe(12);
    expect(SessionsSendArgs.parse({ message: "x", timeoutSeconds: 0 }).timeoutSeconds).toBe(0);
    expect(SessionsSendArgs.safeParse({ message: "x", timeoutSeconds: -1 }).success).toBe(false);
  });

  it("clamp sessions_spawn run timeouts to what an abort timer can hold (1e10 s gave the child up at once)", () => {
    const p = SessionsSpawnArgs.parse({ task: "x", runTimeoutSeconds: 1e10, timeoutSeconds: 1e308 });
    expect(p.runTimeoutSeconds).toBe(MAX_RUN_TIMEOUT_SECONDS);
    expect(p.timeoutSeconds).toBe(MAX_RUN_TIMEOUT_SECONDS);
    expect(() => AbortSignal.timeout(MAX_RUN_TIMEOUT_SECONDS * 1000)).not.toThrow();
    expect(SessionsSpawnArgs.parse({ task: "x", runTimeoutSeconds: 90.5 }).runTimeoutSeconds).toBe(90);
  });

  it.each<[string, () => { success: boolean; error?: { issues: { message: string }[] } }, string]>([
    [
      "sessions_send sessionKey",
      () => SessionsSendArgs.safeParse({ message: "x", sessionKey: "agent:main:\u202Eabc" }),
      "sessionKey contains U+202E RIGHT-TO-LEFT OVERRIDE at index 11",
    ],
    [
      "sessions_send label",
      () => SessionsSendArgs.safeParse({ message: "x", label: "ops\u2066" }),
      "label contains U+2066 LEFT-TO-RIGHT ISOLATE at index 3",
    ],
    [
      "sessions_send agentId",
      () => SessionsSendArgs.safeParse({ message: "x", agentId: "o\u200Bps" }),
      "agentId contains U+200B ZERO WIDTH SPACE at index 1",
    ],
    [
      "sessions_history sessionKey",
      () => SessionsHistoryArgs.safeParse({ sessionKey: "main\u0000" }),
      "sessionKey contains U+0000 NULL at index 4",
    ],
    [
      "sessions_list label",
      () => SessionsListArgs.safeParse({ label: "\u200Fx" }),
      "label contains U+200F RIGHT-TO-LEFT MARK at index 0",
    ],
    [
      "session_status sessionKey",
      () => SessionStatusArgs.safeParse({ sessionKey: "a\u061Cb" }),
      "sessionKey contains U+061C ARABIC LETTER MARK at index 1",
    ],
    [
      "sessions_spawn label",
      () => SessionsSpawnArgs.safeParse({ task: "x", label: "a\u202Db" }),
      "label contains U+202D LEFT-TO-RIGHT OVERRIDE at index 1",
    ],
    [
      "sessions_spawn agentId",
      () => SessionsSpawnArgs.safeParse({ task: "x", agentId: "ops\u0000" }),
      "agentId contains U+0000 NULL at index 3",
    ],
  ])("refuse unsafe characters in %s, naming the character", (_label, parse, message) => {
    const r = parse();
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.message)).toContain(message);
  });

  it("keep joiners in labels (emoji, Persian) but not in keys", () => {
    expect(SessionsSendArgs.safeParse({ message: "x", label: "می‌خواهم 👨‍👩‍👧" }).success).toBe(true);
    expect(SessionsSendArgs.safeParse({ message: "x", sessionKey: "a\u200Db" }).success).toBe(false);
  });
});
