export * from "./turn.js";
export { SessionLeases, type LeaseHandle, type AcquireResult } from "./session-lease.js";
export { Inbox } from "./inbox.js";
export { RunRecords, RUN_RECORD_TTL_SECONDS, decodeRecord, type RunRecord } from "./run-records.js";
export { RunWaiter } from "./run-waiter.js";
export { CancelBus, type CancelMessage } from "./cancel-bus.js";
export { enqueueTurn, requestDrain, type DrainData, type TurnRequest } from "./enqueue.js";
export { DeadLetters, replayRunId, type DeadLetter } from "./dead-letters.js";
export { StorageFaults, type StorageFaultReport } from "./storage-faults.js";
