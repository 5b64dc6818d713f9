import { describe, expect, it } from "vitest";
import { faultText } from "../../src/runs/storage-faults.js";

describe("faultText", () => {
  it("says the code once: Node's fs messages already start with it", () => {
    const fs = { code: "ENOTDIR", message: "ENOTDIR: not a directory, open '/s/a.jsonl'" };
    expect(faultText(fs)).toBe("ENOTDIR: not a directory, open '/s/a.jsonl'");
  });

  it("puts the code before a message that does not carry it", () => {
    expect(faultText({ code: "EIO", message: "write failed" })).toBe("EIO: write failed");
    // A message that only mentions the code later still gets it in front.
    expect(faultText({ code: "EIO", message: "EIOX: other" })).toBe("EIO: EIOX: other");
  });
});
