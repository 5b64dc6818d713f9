/**
 * Wiring of the session tools into a process: the per-run invoker given to agent runtimes, the
 * HTTP endpoint of POST /v1/tools/<name>, and the announce-queue processors of the
 * agent-to-agent flow. (The tools themselves arrive with the cross-session tools issue; until
 * then no tool is offered and the endpoint answers unknown tool.)
 */
import type { Processor } from "bullmq";
import type { Services } from "../app/services.js";
import type { QueueName } from "../queues/queue-names.js";
import type { ToolInvoker } from "../runtimes/types.js";
import type { ToolInvokerFactory } from "../workers/turn-executor.js";
import { SwitchboardError } from "../errors/index.js";

export interface ToolRuntime {
  invokerFor: ToolInvokerFactory;
  endpoint: (name: string, body: unknown) => Promise<unknown>;
  processors: Partial<Record<QueueName, Processor>>;
}

export function createToolRuntime(_svc: Services): ToolRuntime {
  const none: ToolInvoker = {
    definitions: () => [],
    call: async (name) => {
      throw new SwitchboardError("not_found", `unknown tool ${name}`);
    },
  };
  return {
    invokerFor: () => none,
    endpoint: async (name) => {
      throw new SwitchboardError("not_found", `unknown tool ${name}`);
    },
    processors: {},
  };
}
