export * from "./turn.js";
export { SessionLeases } from "./session-lease.js";
export { Inbox } from "./inbox.js";
export { PendingWakes } from "./pending-wakes.js";
export { RunWaiter } from "./run-waiter.js";
export { CancelBus } from "./cancel-bus.js";
export { StorageFaults } from "./storage-faults.js";
