/**
 * `echo` runtime (docs/concepts/config.md, "Runtimes"): replies `echo: <text>`. The embedded default, handy for
 * smoke tests. It does no work, so the only abort point is before it answers.
 */
import { RunAbortedError, type AgentRuntime, type RunInput, type RunOutput } from "./types.js";

export class EchoRuntime implements AgentRuntime {
  readonly kind = "echo";

  async run(input: RunInput): Promise<RunOutput> {
    if (input.signal.aborted) throw new RunAbortedError(input.signal.reason);
    return { reply: `echo: ${input.text}` };
  }
}
