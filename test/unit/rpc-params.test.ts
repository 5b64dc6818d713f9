/** RPC params: route ids sent as JSON numbers must be numbers JSON carries exactly. */
import { describe, expect, it } from "vitest";
import { AgentParams, SendParams } from "../../src/rpc/params.js";

describe("threadId of agent and send", () => {
  for (const [name, schema, base] of [
    ["agent", AgentParams, { message: "hi" }],
    ["send", SendParams, { channel: "telegram", to: "1", message: "hi" }],
  ] as const) {
    it(`${name}: a whole number or a string is taken; past 2^53 or a fraction is refused by name`, () => {
      expect(schema.parse({ ...base, threadId: 42 }).threadId).toBe(42);
      expect(schema.parse({ ...base, threadId: "9007199254740993" }).threadId).toBe("9007199254740993");
      for (const threadId of [2 ** 53, 1.5, 1e21]) {
        const r = schema.safeParse({ ...base, threadId });
        expect(r.success).toBe(false);
        expect(r.error?.issues).toEqual([
          expect.objectContaining({
            path: ["threadId"],
            message: expect.stringContaining("send larger ids as strings"),
          }),
        ]);
      }
    });
  }
});
