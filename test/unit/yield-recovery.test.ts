/**
 * A yielded turn re-run after a crash (its lines written, its run not finished) is recovered
 * from its transcript lines as what it was: ok, no reply, yielded. Not as `killed`, which its
 * `aborted` stop reason alone would say.
 */
import { describe, expect, it } from "vitest";
import { outcomeFromLines } from "../../src/workers/turn-executor.js";
import type { TranscriptEntry } from "../../src/history/transcript-types.js";

const RUN = "11111111-2222-3333-4444-555555555555";
const ts = new Date(1_700_000_000_000).toISOString();

function lines(withNote: boolean): TranscriptEntry[] {
  const out: TranscriptEntry[] = [
    { type: "message", id: `${RUN}:u`, runId: RUN, timestamp: ts, message: { role: "user", content: "yield now" } },
    {
      type: "message",
      id: `${RUN}:t0`,
      runId: RUN,
      timestamp: ts,
      message: { role: "assistant", content: [{ type: "toolCall", id: "c0", name: "sessions_yield", arguments: {} }] },
    },
    {
      type: "message",
      id: `${RUN}:r0`,
      runId: RUN,
      timestamp: ts,
      message: {
        role: "toolResult",
        toolCallId: "c0",
        content: [{ type: "text", text: '{"status":"yielded","message":"wait"}' }],
      },
    },
    {
      type: "message",
      id: `${RUN}:a`,
      runId: RUN,
      timestamp: ts,
      message: { role: "assistant", content: [{ type: "text", text: "" }], stopReason: "aborted" },
    },
  ];
  if (withNote)
    out.push({
      type: "custom",
      id: `${RUN}:y`,
      runId: RUN,
      timestamp: ts,
      customType: "openclaw.sessions_yield",
      data: { message: "wait", note: "wait\n\n[Context: …]" },
    });
  return out;
}

describe("outcomeFromLines", () => {
  it("recovers a yielded turn as ok with no reply, its tool calls and its yield message", () => {
    const r = outcomeFromLines(RUN, lines(true));
    expect(r?.outcome).toEqual({ status: "ok", reply: "" });
    expect(r?.output).toEqual({
      reply: "",
      yielded: { message: "wait" },
      toolCalls: [{ name: "sessions_yield", args: {}, result: { status: "yielded", message: "wait" } }],
    });
  });

  it("an aborted answer without the yield note is still a killed run", () => {
    expect(outcomeFromLines(RUN, lines(false))?.outcome.status).toBe("killed");
  });
});
