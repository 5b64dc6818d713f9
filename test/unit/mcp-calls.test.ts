/**
 * How the MCP server runs a tool call for a client: a sessions_send wait a plain client can wait
 * for (its own request timeout is 60 s unless progress restarts it), progress while waiting for a
 * client that asked for it, and Redis away answered as `unavailable`.
 */
import { describe, expect, it } from "vitest";
import {
  errorResult,
  MCP_PLAIN_WAIT_SECONDS,
  waitableArgs,
  withProgress,
  type CallExtra,
} from "../../src/mcp/server.js";
import { SwitchboardError } from "../../src/errors/index.js";

const notifications: unknown[] = [];
const extra = (progressToken?: string): CallExtra => ({
  ...(progressToken ? { _meta: { progressToken } } : {}),
  sendNotification: async (n) => {
    notifications.push(n);
  },
});

describe("sessions_send waits over MCP", () => {
  it("a client without a progress token waits at most MCP_PLAIN_WAIT_SECONDS (the default 30 s stays)", () => {
    expect(waitableArgs("sessions_send", { message: "x", timeoutSeconds: 600 }, extra())).toEqual({
      message: "x",
      timeoutSeconds: MCP_PLAIN_WAIT_SECONDS,
    });
    expect(waitableArgs("sessions_send", { message: "x", timeoutSeconds: 0 }, extra())).toEqual({
      message: "x",
      timeoutSeconds: 0,
    });
    expect(waitableArgs("sessions_send", { message: "x" }, extra())).toEqual({ message: "x" });
    // A client that asked for progress gets its wait: progress restarts its timeout.
    expect(waitableArgs("sessions_send", { message: "x", timeoutSeconds: 600 }, extra("t1"))).toEqual({
      message: "x",
      timeoutSeconds: 600,
    });
    expect(waitableArgs("sessions_list", { limit: 5 }, extra())).toEqual({ limit: 5 });
  });

  it("progress notifications carry the token while the call runs, and stop with it", async () => {
    notifications.length = 0;
    const done = new Promise((r) => setTimeout(() => r("answer"), 130));
    expect(await withProgress(extra("tok"), done, 40)).toBe("answer");
    const seen = notifications.length;
    expect(seen).toBeGreaterThanOrEqual(2);
    expect(notifications[0]).toMatchObject({
      method: "notifications/progress",
      params: { progressToken: "tok", progress: 1 },
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(notifications).toHaveLength(seen);
    notifications.length = 0;
    expect(await withProgress(extra(), new Promise((r) => setTimeout(() => r(1), 100)), 20)).toBe(1);
    expect(notifications).toHaveLength(0);
  });
});

describe("errors thrown by a tool call", () => {
  it("Redis away is unavailable (retry), a typed error keeps its code, anything else is internal", () => {
    const down = Object.assign(new Error("Reached the max retries per request limit (which is 1)."), {
      name: "MaxRetriesPerRequestError",
    });
    expect(errorResult(down)).toMatchObject({ status: "error", code: "unavailable" });
    expect(errorResult(new SwitchboardError("forbidden", "no"))).toMatchObject({ code: "forbidden", error: "no" });
    expect(errorResult(new TypeError("bug"))).toMatchObject({ code: "internal", error: "bug" });
  });
});
