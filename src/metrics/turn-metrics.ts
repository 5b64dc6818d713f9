/**
 * What a worker observes about the turns it runs: how long they waited in the queue and for
 * the session lease, how long they ran, how they ended, and which were redeliveries after a
 * crash. Each function is one call from the drain (src/workers/drain.ts).
 */
import { Counter, Histogram } from "prom-client";
import type { BegunTurn } from "../runs/inbox.js";
import { processRegistry } from "./registry.js";

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

let instruments:
  | {
      duration: Histogram<"status">;
      queueWait: Histogram;
      leaseWait: Histogram;
      runs: Counter<"status">;
      redeliveries: Counter;
    }
  | undefined;

function turnInstruments() {
  if (instruments) return instruments;
  const registers = [processRegistry()];
  instruments = {
    duration: new Histogram({
      name: "switchboard_turn_duration_seconds",
      help: "Turns run by this process, from turn begin to finish, by final status",
      labelNames: ["status"],
      buckets: SECONDS,
      registers,
    }),
    queueWait: new Histogram({
      name: "switchboard_queue_wait_seconds",
      help: "Time from enqueue to turn begin (first attempts only)",
      buckets: SECONDS,
      registers,
    }),
    leaseWait: new Histogram({
      name: "switchboard_lease_wait_seconds",
      help: "Time a drain waited for its session's lease (0 when it was free)",
      buckets: SECONDS,
      registers,
    }),
    runs: new Counter({
      name: "switchboard_runs_total",
      help: "Runs finished by this process, by status",
      labelNames: ["status"],
      registers,
    }),
    redeliveries: new Counter({
      name: "switchboard_redeliveries_total",
      help: "Turns begun again after an earlier attempt did not finish (a crash, a stall, a hand-back)",
      registers,
    }),
  };
  return instruments;
}

/** Create the instruments so a scrape shows them (at zero) before the first turn. */
export function registerTurnMetrics(): void {
  turnInstruments();
}

export interface TurnTiming {
  startedAt: number;
}

/**
 * A turn was begun: its queue wait (first attempt) or a redelivery (later ones). A turn parked
 * on a storage fault is begun again by design, not because a worker crashed, stalled or handed
 * it back: those retries are switchboard_storage_faults_total's (one per park), not counted
 * here. The park records which attempt it parked (`parkedAttempt`), so only the begin right
 * after a parked attempt is skipped: a run parked, resumed and then lost to a crash is counted,
 * once. A record parked by a version that did not write `parkedAttempt` has only its
 * `stalledReason` (kept until the run ends): none of its later begins is counted, as before.
 */
export function turnStarted({ turn, record }: BegunTurn, now = Date.now()): TurnTiming {
  const m = turnInstruments();
  const attempts = record?.attempts ?? 1;
  if (attempts <= 1) m.queueWait.observe(Math.max(0, now - turn.enqueuedAt) / 1000);
  else if (record && !followsPark(record, attempts)) m.redeliveries.inc();
  return { startedAt: now };
}

/** Whether the attempt before this begin (`attempts`, counting this one) was parked on a storage fault. */
function followsPark(record: NonNullable<BegunTurn["record"]>, attempts: number): boolean {
  if (record.parkedAttempt !== undefined) return record.parkedAttempt === attempts - 1;
  return record.stalledReason !== undefined;
}

/** A begun turn ended with `status` (parked or handed-back turns are not ended). */
export function turnEnded(timing: TurnTiming, status: string): void {
  const m = turnInstruments();
  m.duration.observe({ status }, Math.max(0, Date.now() - timing.startedAt) / 1000);
  m.runs.inc({ status });
}

/** The drain got its session's lease; `waitingSince` is when it first found it busy. */
export function leaseAcquired(waitingSince: number | undefined): void {
  turnInstruments().leaseWait.observe(waitingSince ? Math.max(0, Date.now() - waitingSince) / 1000 : 0);
}
