/**
 * The ready-list consumer: the wake-up path of `workers.wake: "ready-list"` (docs/design/runs.md,
 * "Wake-ups"). A push that finds a session idle appends the session's pending-wake member to the
 * ready list in the same script; a worker with a free slot pops it (BLPOP on its own
 * connection) and drains the session at once. Against a drain job this saves the job's add, its
 * fetch and its completion: two round trips on a turn's path and three BullMQ scripts per drain.
 *
 * The pending wake stays until the drain ends (the script that gives the lease back on an empty
 * inbox clears it in the same step), so a worker killed after the pop is covered by the
 * overdue-wake check (overdue-wakes.ts), which each consumer runs every `workers.stalledIntervalMs`:
 * the lease of the dead drain expires, the wake is overdue, a drain job re-runs the in-flight turn.
 * Whatever a drain cannot finish here (the lease held elsewhere, a storage fault to wait out, a
 * turn handed back at shutdown or on a pause of `runs`, a failure to retry) is handed to a drain
 * job, which has retries, backoff and a place in Bull Board. A drain that yields with turns left
 * (MAX_TURNS_PER_DRAIN) puts its session back at the end of the ready list instead, so other
 * sessions go first. While `runs` is paused (queue-pauses.ts) nothing is popped.
 */
import { StaleFenceError } from "../errors/index.js";
import { requestDrain } from "../runs/enqueue.js";
import { readyConsumerName, wakeSession } from "../runs/pending-wakes.js";
import type { RedisClient } from "../storage/redis-client.js";
import { leasePollMs, type DrainOutcome, type HoldCheck, type SessionDrainer } from "./drain.js";
import { rearmLostPops, rearmOverdueWakes, wakeOverdueMs } from "./overdue-wakes.js";
import type { Slots } from "./slots.js";
import type { WorkerDeps } from "./worker-deps.js";

/** How long one BLPOP blocks: also how long a shutdown may wait for the loop to notice. */
const BLOCK_SECONDS = 1;
/** A drain that failed here is retried as a drain job this much later (then with its backoff). */
const RETRY_AS_JOB_MS = 1000;
/** Wakes that skip the batch pop after one found no backlog. */
const EXTRA_POP_BACKOFF = 16;
/** Pause after a failed pop (Redis away) before trying again. */
const POP_ERROR_PAUSE_MS = 500;
/** How often a consumer held by a paused `runs` queue looks whether it was resumed (a memory read). */
const HOLD_CHECK_MS = 100;

export class ReadyConsumer {
  private readonly conn: RedisClient;
  private readonly drains = new Set<Promise<void>>();
  private loop: Promise<void> | undefined;
  private checker: NodeJS.Timeout | undefined;
  private checking = false;
  private skipExtraPops = 0;
  /** The blocking connection's CLIENT ID (one Redis only), to end its pop at once on close. */
  private clientId: number | undefined;

  constructor(
    private readonly svc: WorkerDeps,
    private readonly drainSession: SessionDrainer,
    private readonly slots: Slots,
    private readonly stopping: AbortSignal,
    /** The `runs` queue's pause flag (queue-pauses.ts): pop nothing, and drains stop between turns. */
    private readonly hold?: HoldCheck,
  ) {
    // Named, so Bull Board's ready-list view can tell who consumes it (src/gateway/ready-board.ts).
    this.conn = svc.connection("worker", readyConsumerName(svc.keys));
    const conn = this.conn;
    let readyBefore = false;
    conn.on("ready", () => {
      // Back after a drop: a pop under way may have taken wakes whose answer was lost with it.
      if (readyBefore) void this.rearmLostPops();
      readyBefore = true;
      // Refreshed on every (re)connect: the id belongs to the socket (one Redis only).
      if (!("nodes" in conn))
        void conn.client("ID").then(
          (id) => (this.clientId = id as number),
          () => (this.clientId = undefined),
        );
    });
  }

  start(): void {
    this.loop ??= this.run();
    // On its own timer: a worker whose slots are all busy still re-arms lost wakes.
    this.checker ??= setInterval(() => void this.checkOverdueWakes(), this.svc.config.workers.stalledIntervalMs);
    this.checker.unref();
  }

  /**
   * Stop popping; resolves once the loop has left and the drains it started have ended. The
   * pop under way is ended with CLIENT UNBLOCK, which answers it as a timeout: nothing popped is
   * lost, as it could be if the socket were dropped (on a Cluster it runs out its second).
   */
  async close(): Promise<void> {
    clearInterval(this.checker);
    if (this.clientId !== undefined) await this.svc.redis.client("UNBLOCK", this.clientId).catch(() => undefined);
    await this.loop;
    await Promise.allSettled([...this.drains]);
    this.conn.disconnect();
  }

  /** Paused, as last read (a resume is seen within a second). */
  private get held(): boolean {
    return this.hold?.cached() ?? false;
  }

  /** Drains running now that came from the ready list. */
  get active(): number {
    return this.drains.size;
  }

  private async run(): Promise<void> {
    const { svc } = this;
    while (!this.stopping.aborted) {
      if (this.held) {
        // Sessions stay on the ready list, in order, until the queue is resumed.
        await new Promise((r) => setTimeout(r, HOLD_CHECK_MS));
        continue;
      }
      // The slot comes first: a popped session always has one.
      await this.slots.acquire();
      let member: string | null = null;
      try {
        if (!this.stopping.aborted) {
          const popped = await this.conn.blpop(svc.keys.readyList(), BLOCK_SECONDS);
          member = popped ? popped[1] : null;
        }
      } catch (err) {
        if (!this.stopping.aborted) {
          svc.log.warn({ err: (err as Error).message }, "ready list: pop failed; trying again");
          await new Promise((r) => setTimeout(r, POP_ERROR_PAUSE_MS));
        }
      }
      if (member === null) {
        this.slots.release();
        continue;
      }
      this.startDrain(member);
      await this.popMore();
    }
  }

  /**
   * Under load the list holds more sessions than one pop takes: fill the other free slots in one
   * round trip (`LPOP key count`). When such a pop comes back empty (no backlog), the next few
   * wakes skip it, so a quiet deployment does not pay a wasted round trip per wake.
   */
  private async popMore(): Promise<void> {
    if (this.held) return;
    if (this.skipExtraPops > 0) {
      this.skipExtraPops--;
      return;
    }
    let slots = 0;
    while (!this.stopping.aborted && this.slots.tryAcquire()) slots++;
    if (slots === 0) return;
    const popped = await this.conn.lpop(this.svc.keys.readyList(), slots).catch(() => null);
    if (!popped?.length) this.skipExtraPops = EXTRA_POP_BACKOFF;
    for (const m of popped ?? []) {
      slots--;
      this.startDrain(m);
    }
    for (; slots > 0; slots--) this.slots.release();
  }

  /** Drain a popped session in the slot taken for it. */
  private startDrain(member: string): void {
    const drain = this.drainMember(member).finally(() => {
      this.slots.release();
      this.drains.delete(drain);
    });
    this.drains.add(drain);
  }

  private async checkOverdueWakes(): Promise<void> {
    if (this.checking || this.stopping.aborted) return;
    this.checking = true;
    const { svc } = this;
    await rearmOverdueWakes(svc, wakeOverdueMs(svc.config))
      .catch((err: Error) => svc.log.warn({ err: err.message }, "overdue wake check failed"))
      .finally(() => (this.checking = false));
  }

  private async rearmLostPops(): Promise<void> {
    if (this.stopping.aborted) return;
    await rearmLostPops(this.svc).catch((err: Error) =>
      this.svc.log.warn({ err: err.message }, "lost-pop check after a reconnect failed"),
    );
  }

  private async drainMember(member: string): Promise<void> {
    const { svc } = this;
    const sessionKey = wakeSession(member);
    // Whether the wake may be cleared: the drain is over or a drain job has the session.
    let handedOn = true;
    let cleared = false;
    try {
      if (this.stopping.aborted) {
        // Popped as the worker began stopping: hand it on without beginning its turn.
        await requestDrain(svc, sessionKey);
      } else {
        const out = await this.drainSession(sessionKey, {
          data: {},
          keepWake: member,
          log: async (line) => svc.log.info({ sessionKey }, line),
          ...(this.hold ? { hold: this.hold } : {}),
        });
        // A script that gave the lease back on an empty inbox cleared the wake with it.
        cleared = out.kind === "done" && out.emptied;
        if (out.kind === "done" && out.more) {
          // Yielded with turns left: back of the ready list, wake kept (no drain job).
          await svc.wakes.reready(member);
          cleared = true;
        } else await this.handOn(sessionKey, out);
      }
    } catch (err) {
      if (err instanceof StaleFenceError) {
        // The lease was lost: another holder took over, or it lapsed (Redis away, a stalled
        // event loop) with the turn still in flight and nobody on it. The wake stays: the
        // overdue check leaves it while a lease is held and re-arms it once none is.
        svc.log.warn({ sessionKey, err: err.message }, "ready drain lost its lease");
        handedOn = false;
      } else {
        svc.log.warn({ sessionKey, err: (err as Error).message }, "ready drain failed; retrying as a drain job");
        handedOn = await requestDrain(svc, sessionKey, RETRY_AS_JOB_MS).then(
          () => true,
          () => false,
        );
      }
    }
    // If even the add failed (Redis away), the wake stays pending and the overdue check re-arms it.
    if (handedOn && !cleared) await svc.wakes.clear(member).catch(() => undefined);
  }

  /** What this drain leaves to a drain job (see the module comment). */
  private async handOn(sessionKey: string, out: DrainOutcome): Promise<void> {
    switch (out.kind) {
      case "busy":
        return await requestDrain(this.svc, sessionKey, leasePollMs(out.retryInMs));
      case "parked":
        return await requestDrain(this.svc, sessionKey, out.parkMs);
      case "handedBack":
        return await requestDrain(this.svc, sessionKey);
      case "done":
        return;
    }
  }
}
