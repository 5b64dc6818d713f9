/** The config errors `parseConfig` reports for `input`, as `<path>: <message>` lines. */
import { expect } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { ConfigError } from "../../src/errors/index.js";

export function issuesOf(input: unknown): string[] {
  try {
    parseConfig(input);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("expected a ConfigError");
}
