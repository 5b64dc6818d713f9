/** The one silent-reply rule: where each token (and an empty reply) means "say nothing". */
import { describe, expect, it } from "vitest";
import { SILENT_RULES, isSilentReply, type SilentContext } from "../../src/history/silent-reply.js";

describe("silent replies by context", () => {
  const cases: [SilentContext, string, boolean][] = [
    ["channel", "  no_reply\n", true],
    ["channel", "ANNOUNCE_SKIP", true],
    ["channel", "", true],
    ["channel", "NO_REPLY, thanks", false],
    ["reply-back", "REPLY_SKIP", true],
    ["reply-back", "ANNOUNCE_SKIP", false],
    ["reply-back", " ", true],
    ["announce", "announce_skip", true],
    ["announce", "REPLY_SKIP", true],
    ["subagent-announce", "NO_REPLY", true],
    ["subagent-announce", "REPLY_SKIP", false],
    // An empty sub-agent result is still announced ("no output").
    ["subagent-announce", "", false],
    ["history", "NO_REPLY", true],
    ["history", "REPLY_SKIP", false],
    ["history", "", false],
  ];
  it.each(cases)("%s: %j silent = %s", (context, reply, silent) => {
    expect(isSilentReply(context, reply)).toBe(silent);
  });

  it("has a rule for every context it is asked about", () => {
    expect(Object.keys(SILENT_RULES).sort()).toEqual([
      "announce",
      "channel",
      "history",
      "reply-back",
      "subagent-announce",
    ]);
    expect(isSilentReply("channel", undefined)).toBe(true);
  });
});
