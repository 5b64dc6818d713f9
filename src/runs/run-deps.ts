/**
 * What the run machinery needs from a process: the stores and queues a turn passes through.
 * The composition root (src/app) builds them; each function here takes only the part it uses,
 * so the layers above (tools, workers, the gateway) hand over their own, wider, dependencies
 * and this folder never imports the wiring that imports it.
 */
import type { Config } from "../config/schema.js";
import type { Queues } from "../queues/queues.js";
import type { SessionStore } from "../storage/session-store.js";
import type { CancelBus } from "./cancel-bus.js";
import type { DeadLetters } from "./dead-letters.js";
import type { Inbox } from "./inbox.js";
import type { PendingWakes } from "./pending-wakes.js";
import type { RunRecords } from "./run-records.js";

export interface RunDeps {
  /** Job options (attempts, backoff) come from the config through the jobs table. */
  config: Config;
  sessions: SessionStore;
  inbox: Inbox;
  /** Pending wakes and the ready list, outside the push scripts. */
  wakes: PendingWakes;
  runs: RunRecords;
  queues: Queues;
  cancels: CancelBus;
  deadLetters: DeadLetters;
}
